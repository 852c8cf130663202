#!/usr/bin/env python3
"""GPU benchmark: mcprm's vLLM backend against raw vLLM and a naive round-by-round pipeline,
label quality of vllm vs hf on the bundled model, and Ray scaling over GPUs.

One command runs everything that fits the machine and prints one table:

    PYTHONPATH=/tmp/site:. python3 bench/gpu_bench.py all --out OUT_DIR [--parts correctness,0.5b-vary,...]

Each part runs in its own subprocess (one vLLM engine per process, GPU memory freed in between) and appends
JSON lines to OUT_DIR/results.jsonl. Parts:

* ``correctness``: the bundled model labels the same bundled solutions with ``--backend hf --device cuda``
  and/or ``--backend vllm`` (``--backends``); first-error F1 against the exact checker for each.
* ``throughput --size S --lengths fixed|vary``: the same list of step-prefix requests at K=8 on a
  random-weight model of S's shape (load_format="dummy"), all modes in one process on one GPU (``--modes``):
  ``raw`` (every request in one ``LLM.generate``, timed first and again last), ``naive-rounds`` (one
  ``LLM.generate`` per step index), ``naive-serial`` (one call per step, one solution at a time),
  ``mcprm-per-step`` / ``mcprm-binary-search`` (mcprm's scheduler streaming on the ``loop`` engine),
  ``rounds-binary-search`` (the scheduler in synchronous rounds) and ``async-*`` (streaming on vLLM's
  ``AsyncLLM``). ``vary``: generation ends at any of 1/96 of the vocabulary's ids (geometric lengths, mean
  ~90, cap 256); ``fixed``: exactly max tokens.
* ``scaling --gpus N``: ``mcprm label`` (Ray executor, one vLLM actor per GPU) on N GPUs, same work.

Prompts for random-weight models: a WordLevel tokenizer whose vocabulary covers the model's (every sampled
id decodes; the bundled character tokenizer has ~60 ids and cannot decode a 152k-vocab model's samples),
and synthetic solutions with realistic shapes (problem ~150 tokens, 3-10 steps of 30-80 tokens each).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

for k, v in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "VLLM_USE_FLASHINFER_SAMPLER": "0",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(k, v)

from gpu_workload import (  # noqa: E402  (bench/ is on sys.path: the script's folder)
    GpuUtil,
    K,
    emit,
    fast_stop_token_lookup,
    gpu_name,
    make_model_dir,
    per_step_requests,
    prompt_format,
    sampling,
    workload,
)


def part_throughput(a):
    """Every mode on one GPU in one process, each engine with 0.42 of the GPU's memory: mcprm's ``loop``
    backend, whose ``LLM`` also serves the raw and naive ``LLM.generate`` calls, and an ``AsyncLLM`` backend."""
    import vllm

    from graders import grade_batch
    from pipeline.labeling.scheduler import ProblemGrader, Scheduler, SchedulerSettings
    from pipeline.labeling.strategies import StrategyParams
    from rollouts.vllm_backend import VLLMBackend

    mdir, tdir = make_model_dir(a.size)
    sols = workload(a.solutions)
    flat, rounds = per_step_requests(sols)
    sc = sampling(a.lengths, a.max_tokens)
    if sc.stop_token_ids:
        fast_stop_token_lookup()
    eng = dict(tokenizer=tdir, load_format="dummy", dtype="bfloat16", max_model_len=4096, seed=0,
               gpu_memory_utilization=a.mem)
    t0 = time.time()
    loop = VLLMBackend(mdir, engine="loop", **eng)  # its LLM also serves raw / naive (while the loop idles)
    init_sync = time.time() - t0
    t0 = time.time()
    asyn = VLLMBackend(mdir, engine="async", **eng) if "async" in a.modes else None
    init_async = time.time() - t0
    llm = loop.llm
    from vllm import SamplingParams

    from rollouts.base import GenRequest

    # Warm-up on the real request mix (untimed): the first pass over new batch shapes pays one-off costs
    # (kernel JIT, allocator growth) that a short warm-up misses; it moved the first timed mode by up to 40 %.
    wsols = workload(max(8, a.solutions // 4), seed=99)
    wflat, _ = per_step_requests(wsols)
    wreqs = [GenRequest(r.prompt, r.n, r.seed + 1, r.group) for r in wflat]
    llm.generate([r.prompt for r in wreqs], [SamplingParams(n=r.n, seed=r.seed, max_tokens=sc.max_new_tokens,
                                                            ignore_eos=True) for r in wreqs], use_tqdm=False)
    for be in filter(None, (loop, asyn)):
        be.generate(wreqs, sc)

    def params(r):
        return SamplingParams(n=r.n, seed=r.seed, temperature=sc.temperature, max_tokens=sc.max_new_tokens,
                              stop_token_ids=list(sc.stop_token_ids) or None, ignore_eos=sc.ignore_eos)

    def calls(batches):
        gen = 0
        for b in batches:
            res = llm.generate([r.prompt for r in b], [params(r) for r in b], use_tqdm=False)
            gen += sum(len(c.token_ids) for o in res for c in o.outputs)
        return gen

    serial_sols = {s.key for s in sols[: a.serial_solutions]}
    serial = [[r] for r in flat if r.group in serial_sols]  # one call per step, one solution at a time
    out = Path(a.out)
    base = {"part": "throughput", "size": a.size, "lengths": a.lengths, "gpu": gpu_name(), "vllm": vllm.__version__,
            "init_sync_s": round(init_sync, 1), "init_async_s": round(init_async, 1), "k": K}

    def record(mode, requests, rollouts, gen, dt, util, **extra):
        emit(out, dict(base, mode=mode, requests=requests, rollouts=rollouts, generated_tokens=gen, seconds=dt,
                       tok_per_s=gen / dt, gpu_util=util.mean, gpu_idle_share=util.idle_share, **extra))

    def mcprm(strategy, backend, tag, streaming=None):
        g0 = backend.stats.generated_tokens
        settings = SchedulerSettings(strategy, StrategyParams(k=K), sampling=sc, seed=0,
                                     streaming=backend.streaming if streaming is None else streaming)
        sched = Scheduler(backend, ProblemGrader(grade_batch), prompt_format(), settings)
        with GpuUtil() as u:
            t = time.time()
            sched.label(sols)
            dt = time.time() - t
        record(tag, sched.stats.requests, sched.stats.rollouts, backend.stats.generated_tokens - g0, dt, u,
               rounds=sched.stats.rounds, grade_s=round(sched.stats.grade_seconds, 2),
               prefix_cache_hit_rate=backend.stats.extra.get("prefix_cache_hit_rate"))

    for mode in a.modes.split(","):
        for be in filter(None, (loop, asyn)):
            be.reset_prefix_cache()
        if mode in ("raw", "raw-again", "naive-rounds", "naive-serial"):
            batches = {"raw": [flat], "raw-again": [flat], "naive-rounds": rounds, "naive-serial": serial}[mode]
            with GpuUtil() as u:
                t = time.time()
                gen = calls(batches)
                dt = time.time() - t
            n = sum(len(b) for b in batches)
            record(mode, n, n * K, gen, dt, u, calls=len(batches))
        elif mode == "rounds-binary-search":  # mcprm's scheduler in sync mode: one batch per round, waited for
            mcprm("binary-search", loop, mode, streaming=False)
        elif mode.startswith("mcprm-"):  # mcprm's streaming scheduler on the loop engine (the default)
            mcprm(mode.removeprefix("mcprm-"), loop, mode)
        elif mode.startswith("async-"):  # the same on vLLM's AsyncLLM
            mcprm(mode.removeprefix("async-"), asyn, mode)
    for be in filter(None, (loop, asyn)):
        be.close()


def part_correctness(a):
    from pipeline.commands.evaluate import evaluate
    from pipeline.config import LabelConfig
    from pipeline.run import label

    out = Path(a.out)
    for backend in a.backends.split(","):
        o = str(out / f"corpus-{backend}")
        cfg = LabelConfig(
            output=o,
            backend=backend,
            device="cuda",
            executor="local",
            k=8,
            limit=a.solutions,
            progress=False,
            gpu_memory_utilization=0.5,
            shard_size=1000,  # one shard: few files to bring back
            max_model_len=512,  # the bundled model's max_position_embeddings
            **({"dtype": "float16"} if backend == "vllm" else {}),  # vLLM's FlashAttention has no float32
        )
        t = time.time()
        res = label(cfg)
        dt = time.time() - t
        m = evaluate(o, "synthetic")
        emit(
            out,
            {
                "part": "correctness",
                "backend": backend,
                "solutions": m["solutions"],
                "f1": m["f1"],
                "acc_error": m["acc_error"],
                "acc_correct": m["acc_correct"],
                "step_accuracy": m["step_accuracy"],
                "rollouts": m["rollouts"],
                "rollout_tokens": m["rollout_tokens"],
                "seconds": dt,
                "gpu": gpu_name(),
                "throughput": res.manifest.get("throughput", {}).get("generated_tokens_per_s"),
            },
        )


def part_scaling(a):
    import json as _json

    from pipeline.config import LabelConfig
    from pipeline.run import label

    mdir, tdir = make_model_dir(a.size)
    sols = workload(a.solutions, seed=1)  # the same work for every GPU count (strong scaling)
    inp = Path(tempfile.mkdtemp()) / "in.jsonl"
    with open(inp, "w") as f:
        for s in sols:
            f.write(
                _json.dumps({"id": s.id, "problem": s.problem, "answer": s.answer, "steps": list(s.steps)})
                + "\n"
            )
    o = tempfile.mkdtemp(prefix=f"mcprm-scale-{a.gpus}-")
    cfg = LabelConfig(
        input=[str(inp)],
        output=o,
        model=mdir,
        tokenizer=tdir,
        backend="vllm",
        executor="ray",
        num_workers=a.gpus,
        gpus_per_worker=1,
        k=K,
        max_new_tokens=a.max_tokens,
        load_format="dummy",
        prompt_template="{problem} ",
        step_separator=" ",
        shard_size=a.shard_size,
        strategy="per-step",
        progress=False,
        ignore_eos=True,
        dtype="bfloat16",
        max_model_len=4096,
    )
    t = time.time()
    res = label(cfg)
    dt = time.time() - t
    th = res.manifest["throughput"]
    emit(
        Path(a.out),
        {
            "part": "scaling",
            "size": a.size,
            "gpus": a.gpus,
            "solutions": a.solutions,
            "rollouts": res.manifest["counts"]["rollouts"],
            "generated_tokens": res.manifest["counts"]["rollout_tokens"],
            "wall_s": dt,
            "run_s": th["seconds"],
            "startup_s": th.get("startup_seconds"),
            "labeling_s": th.get("labeling_seconds"),
            "tok_per_s": th["generated_tokens_per_s"],
            "tok_per_s_incl_startup": th.get("generated_tokens_per_s_incl_startup"),
            "gpu": gpu_name(),
            "engine_tok_per_s_per_gpu": th.get("engine_tok_per_s_per_worker"),
            "prefix_cache_hit_rate": th.get("prefix_cache_hit_rate"),
        },
    )


# ------------------------------------------------------------------------------------------ driver
def run_part(args: list[str], out: Path, timeout: float) -> None:
    """One part in its own process; its output goes live into OUT/logs.txt (kept if the call is cut off)."""
    cmd = [sys.executable, __file__, *args, "--out", str(out)]
    print("::", " ".join(args), flush=True)
    if timeout < 30:
        print("   skipped: not enough time left in this call", flush=True)
        return
    t = time.time()
    with open(out / "logs.txt", "a") as log:  # one file: the device returns only a few
        log.write(f"\n===== {' '.join(args)}\n")
        log.flush()
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            rc = "timeout"
        log.write(f"===== rc={rc} after {time.time() - t:.0f} s\n")
    print(f"   rc={rc} in {time.time() - t:.0f} s", flush=True)
    if rc != 0:
        print((out / "logs.txt").read_text()[-3000:], flush=True)


def table(out: Path) -> None:
    rows = (
        [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
        if (out / "results.jsonl").exists()
        else []
    )
    thr = [r for r in rows if r["part"] == "throughput"]
    if thr:
        print(f"\nthroughput, K={K} (GPU {thr[0].get('gpu')}, vLLM {thr[0].get('vllm')})")
        print(
            f"{'size':5} {'lengths':7} {'mode':22} {'requests':>8} {'gen tokens':>11} {'s':>7} {'tok/s':>9} "
            f"{'vs raw':>7} {'vs naive':>8} {'GPU util':>8}"
        )
        for r in thr:
            base = {
                m["mode"]: m["tok_per_s"]
                for m in thr
                if m["size"] == r["size"] and m["lengths"] == r["lengths"]
            }
            vr = r["tok_per_s"] / base["raw"] if "raw" in base else float("nan")
            vn = r["tok_per_s"] / base["naive-rounds"] if "naive-rounds" in base else float("nan")
            print(
                f"{r['size']:5} {r['lengths']:7} {r['mode']:22} {r['requests']:8d} {r['generated_tokens']:11d} "
                f"{r['seconds']:7.1f} {r['tok_per_s']:9.0f} {vr:7.2f} {vn:8.2f} {r.get('gpu_util') or 0:5.0f}%"
            )
    cor = [r for r in rows if r["part"] == "correctness"]
    if cor:
        print("\nlabel quality on the bundled model (first-error F1 vs the exact checker)")
        for r in cor:
            print(
                f"  {r['backend']:5} solutions={r['solutions']} f1={r['f1']:.3f} acc_error={r['acc_error']:.3f} "
                f"acc_correct={r['acc_correct']:.3f} step_acc={r['step_accuracy']:.3f} tokens={r['rollout_tokens']} "
                f"{r['seconds']:.0f}s"
            )
    sc = [r for r in rows if r["part"] == "scaling"]
    if sc:
        one = next((r["tok_per_s"] for r in sc if r["gpus"] == 1), None)
        print("\nscaling (mcprm label, Ray, one vLLM actor per GPU)")
        for r in sc:
            eff = r["tok_per_s"] / (one * r["gpus"]) if one else float("nan")
            print(
                f"  gpus={r['gpus']} tok/s={r['tok_per_s']:.0f} labeling_s={r.get('labeling_s')} "
                f"startup_s={r.get('startup_s')} wall_s={r['wall_s']:.1f} efficiency={eff:.2f}"
            )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("part", choices=["all", "throughput", "correctness", "scaling", "table"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", default="0.5b")
    ap.add_argument("--lengths", default="vary")
    ap.add_argument("--solutions", type=int, default=96)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--shard-size", type=int, default=8)
    ap.add_argument("--mem", type=float, default=0.42, help="GPU memory share of each of the two engines")
    ap.add_argument("--serial-solutions", type=int, default=4, help="solutions timed in the naive-serial mode")
    ap.add_argument("--modes", default="mcprm-per-step,raw,naive-rounds,mcprm-binary-search,rounds-binary-search,"
                    "async-per-step,async-binary-search,naive-serial,raw-again")
    ap.add_argument("--correctness-solutions", type=int, default=300)
    ap.add_argument("--backends", default="hf,vllm", help="correctness: backends to run")
    ap.add_argument("--deadline-s", type=float, default=570, help="stop starting parts after this many seconds")
    ap.add_argument("--parts", default="correctness,0.5b-fixed,0.5b-vary,7b-vary")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.part == "throughput":
        return part_throughput(a)
    if a.part == "correctness":
        return part_correctness(a)
    if a.part == "scaling":
        return part_scaling(a)
    if a.part == "table":
        return table(out)
    # --parts: correctness, SIZE-LENGTHS (e.g. 0.5b-vary, 7b-fixed), scaling-N
    t_start = time.time()

    def left() -> float:
        return a.deadline_s - (time.time() - t_start)

    for part in filter(None, a.parts.split(",")):
        if part == "correctness":
            run_part(["correctness", "--solutions", str(a.correctness_solutions), "--backends", a.backends], out,
                     min(400, left()))
        elif part.startswith("scaling-"):
            g = part.split("-", 1)[1]
            run_part(["scaling", "--gpus", g, "--size", "0.5b", "--solutions", str(a.solutions),
                      "--lengths", "fixed", "--max-tokens", "128", "--shard-size", str(a.shard_size)], out,
                     min(400, left()))
        else:
            size, lengths = part.split("-")
            n = a.solutions if size == "0.5b" else max(16, a.solutions // 3)
            run_part(["throughput", "--size", size, "--lengths", lengths, "--solutions", str(n), "--max-tokens",
                      str(a.max_tokens), "--mem", str(a.mem), "--modes", a.modes, "--serial-solutions",
                      str(a.serial_solutions)], out, min(420, left()))
    table(out)


if __name__ == "__main__":
    main()
