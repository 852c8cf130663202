#!/usr/bin/env python3
"""GPU fleet benchmark: Ray scaling over 1, 2 and 4 GPUs on one fixed job, engine start (cold, warm,
under Ray and bare), grading of MATH-style LaTeX answers at GPU speed, tensor parallel, deterministic mode.

One process per device call; every result is a JSON line in OUT/fleet.jsonl, printed as it comes:

    PYTHONPATH=/tmp/site:. python3 bench/gpu_fleet.py --out OUT --size 0.5b \\
        --runs "640@4,640@2,640@1,96@4x3,96@2x3,96@1,latex96@4,int96@4" --warm-runs "640@4,96@4x2" --bare

* One **fleet** (a ``RayExecutor`` with one vLLM actor per GPU) is started once; its engine start is measured
  (cold on a fresh machine). Each run then labels a fixed job through ``label(cfg, executor=fleet.borrow(n))``
  on the first ``n`` actors: labeling time only, engine start apart. ``640@2`` = the 640-solution job on 2
  GPUs with 8-solution shards (the fixed job); ``96@4`` = 96 solutions on 4 GPUs with automatic shard
  sizing (default size, guided: the last shards smaller); ``x3`` = three repetitions (median reported).
* ``--warm-runs``: the fleet is closed and a second one started on the same machine (warm compile caches:
  the "second run" start), then these runs.
* ``--bare``: a bare ``vllm.LLM`` with the same arguments on one GPU in a subprocess (no Ray), warm caches:
  the engine-start baseline.
* Workload: synthetic solutions of realistic shape (problem 100-200 tokens, 3-10 steps of 30-80), K=8, exactly
  128 new tokens per continuation, per-step. The random-weight model's vocabulary is mostly ``wN`` words, but
  1/64 of its ids decode to boxed LaTeX answers (fractions, radicals, intervals, tuples; many equivalent forms)
  and 1/64 to boxed integers, so every continuation carries about four boxed answers and the grader parses
  and compares real answers (``latex`` jobs: LaTeX gold answers, the default; ``int`` jobs: integer golds).
* Per run: labeling s, generated tok/s, efficiency vs the 1-GPU rate of the same job and run set, GPU
  utilisation (NVML, mean over the run's GPUs), grading share (grader seconds / shard seconds), and from the
  shard timeline: each actor's busy share and the end-of-run tail (last shard end minus the first actor's).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gpu_workload import COMMON, SHAPES, VOCAB, GpuUtil  # noqa: E402

K = 8
MAX_TOKENS = 128


# ---------------------------------------------------------------------------------------------- workload
def latex_answers(n: int) -> list[str]:
    """``n`` distinct LaTeX answers of MATH's families; many are equivalent forms of each other."""
    out: list[str] = []
    seen: set[str] = set()
    fams = [
        lambda a, b: f"\\frac{{{a}}}{{{b}}}",
        lambda a, b: f"{a}\\sqrt{{{b}}}",
        lambda a, b: f"[{a},{a + b})",
        lambda a, b: f"({a},{b})",
        lambda a, b: f"\\dfrac{{{a}}}{{{b}}}",
        lambda a, b: f"\\frac{{{a}\\sqrt{{{b}}}}}{{2}}",
        lambda a, b: f"{a}.{b}",
        lambda a, b: f"\\left({a},-{b}\\right)",
    ]
    i = 0
    while len(out) < n:
        a, b = 1 + (i // 8) % 40, 2 + (i // 320) % 37
        s = fams[i % len(fams)](a, b)
        i += 1
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def gold_latex(rng: random.Random) -> str:
    a, b = rng.randint(1, 12), rng.randint(2, 12)
    return rng.choice([f"\\frac{{{a}}}{{{b}}}", f"{a}\\sqrt{{{b}}}", f"[{a},{a + b})", f"({a},{b})"])


def make_model_dir(size: str) -> tuple[str, str]:
    from tokenizers import Tokenizer, models, pre_tokenizers

    # A fixed path: vLLM's compile cache is keyed by the model's path, and a user's model path is stable, so a
    # later process on the same machine (the "second run") finds the first one's cache, as it would for them.
    path = os.path.join(tempfile.gettempdir(), f"mcprm-fleet-{size}")
    tdir = os.path.join(path, "tok")
    os.makedirs(tdir, exist_ok=True)
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<pad>": 3}
    ans = iter(latex_answers(VOCAB // 64 + 1))
    for i in range(4, VOCAB):
        if i % 64 == 0:
            vocab[f"\\boxed{{{next(ans)}}}"] = i
        elif i % 64 == 32:
            vocab[f"\\boxed{{{i // 64 % 40}}}#{i}"] = i  # an integer answer (unique token: #id is ignored text)
        else:
            vocab[f"w{i}"] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(os.path.join(tdir, "tokenizer.json"))
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
               "unk_token": "<unk>", "pad_token": "<pad>", "model_max_length": 32768},
              open(os.path.join(tdir, "tokenizer_config.json"), "w"))
    json.dump(dict(COMMON, **SHAPES[size]), open(os.path.join(path, "config.json"), "w"), indent=1)
    json.dump({"bos_token_id": 1, "eos_token_id": 2}, open(os.path.join(path, "generation_config.json"), "w"))
    return path, tdir


def write_job(n: int, golds: str, seed: int = 1) -> str:
    """JSONL input of ``n`` solutions (the same for every GPU count: strong scaling)."""
    rng = random.Random(seed)

    def words(k):
        return " ".join(f"w{i}" for i in (rng.randrange(4, VOCAB) for _ in range(k)) if i % 32)

    p = Path(tempfile.mkdtemp(prefix="mcprm-job-")) / f"{golds}{n}.jsonl"
    with open(p, "w") as f:
        for i in range(n):
            answer = gold_latex(rng) if golds == "latex" else str(rng.randint(0, 39))
            steps = [words(rng.randint(30, 80)) for _ in range(rng.randint(3, 10))]
            f.write(json.dumps({"id": f"s{i}", "problem": words(rng.randint(100, 200)), "answer": answer,
                                "steps": steps}) + "\n")
    return str(p)


# ---------------------------------------------------------------------------------------------- measuring
def timeline_facts(tl: list[dict], n_actors: int) -> dict:
    """Busy share per actor (union of its shards' intervals over the run) and the end-of-run tail."""
    if not tl:
        return {}
    t0 = min(t["submitted"] for t in tl)
    t1 = max(t["ended"] for t in tl)
    span = t1 - t0
    busy, last_end = [], []
    for a in range(n_actors):
        iv = sorted((t["started"], t["ended"]) for t in tl if t["actor"] == a)
        tot, cur_s, cur_e = 0.0, None, None
        for s, e in iv:
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    tot += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        if cur_e is not None:
            tot += cur_e - cur_s
        busy.append(round(tot / span, 3) if span else None)
        last_end.append(max((e for _, e in iv), default=t0))
    gen = sum(t.get("generate_s") or 0 for t in tl)
    grade = sum(t.get("grade_s") or 0 for t in tl)
    shard_s = sum(t["ended"] - t["started"] for t in tl)
    dispatch = [t["started"] - t["submitted"] for t in tl]
    return {"busy_share": busy, "tail_s": round(t1 - min(last_end), 2), "span_s": round(span, 2),
            "shards": len(tl), "grade_share": round(grade / shard_s, 4) if shard_s else None,
            "generate_share": round(gen / shard_s, 4) if shard_s else None,
            "dispatch_wait_s_mean": round(statistics.mean(dispatch), 3)}


_LOG_PATS = {"weights_s": r"Loading weights took ([\d.]+) seconds",
             "model_load_s": r"Model loading took [\d.]+ Gi?B(?: memory)? and ([\d.]+) seconds",
             "compile_s": r"torch.compile takes ([\d.]+) s in total",
             "graphs_s": r"Graph capturing finished in ([\d.]+) secs?",
             "init_engine_s": r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s",
             "init_compile_s": r"warmup model\) took [\d.]+ s(?:econds)? \(compilation: ([\d.]+) s",
             "dynamo_s": r"Dynamo bytecode transform time: ([\d.]+) s",
             "profile_s": r"Memory profiling takes ([\d.]+) seconds"}
# (vLLM's wordings differ by release: "took 136.57 seconds", "took 200.69 s (compilation: 1.48 s)")
_LOG_KEEP = re.compile(r"took|takes|seconds|secs|compil|[Gg]raph|Loading|init engine|profil|KV cache|cache|"
                       r"Available|Starting|Initializing|ERROR|Error|WARN")


def log_facts(texts) -> dict:
    """What vLLM's own log lines in ``texts`` say about engine start (seconds, per engine)."""
    found: dict[str, list[float]] = {k: [] for k in _LOG_PATS}
    for text in texts:
        for k, p in _LOG_PATS.items():
            found[k] += [float(x) for x in re.findall(p, text)]
    return {k: v for k, v in found.items() if v}


def keep_log(texts, path: Path) -> None:
    """The engine-start lines of ``texts`` (for reading where the time went), in ``path``."""
    with open(path, "w") as f:
        for text in texts:
            f.write("\n".join(x[:400] for x in text.splitlines() if _LOG_KEEP.search(x)) + "\n-----\n")


def worker_logs(skip: set[str] = frozenset()) -> list[str]:
    out = []
    for f in sorted(glob.glob("/tmp/ray/session_latest/logs/worker-*")):
        if f not in skip:
            try:
                out.append(open(f, errors="replace").read())
            except OSError:
                pass
    return out


# ---------------------------------------------------------------------------------------------- runs
def run_cfg(base: dict, inp: str, n_workers: int, shard_size: int | None, tag: str):
    from pipeline.config import LabelConfig

    kw = dict(base, input=[inp], output=tempfile.mkdtemp(prefix=f"mcprm-run-{tag}-"), num_workers=n_workers,
              progress=False)
    if shard_size:
        kw["shard_size"] = shard_size
    return LabelConfig(**kw)


def parse_runs(spec: str) -> list[tuple[str, int, int, int]]:
    """'640@4,96@2x3,int96@4' -> [(golds, solutions, gpus, reps)]."""
    out = []
    for tok in filter(None, spec.split(",")):
        m = re.fullmatch(r"(latex|int)?(\d+)@(\d+)(?:x(\d+))?", tok.strip())
        if not m:
            raise SystemExit(f"bad run spec {tok!r}")
        out.append((m.group(1) or "latex", int(m.group(2)), int(m.group(3)), int(m.group(4) or 1)))
    return out


def emit(out: Path, rec: dict) -> None:
    rec["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print("RESULT " + json.dumps(rec), flush=True)
    with open(out / "fleet.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n")


def start_fleet(base: dict, n: int, out: Path, label: str, a) -> object:
    from pipeline.config import LabelConfig
    from pipeline.execution.executors import RayExecutor

    cfg = LabelConfig(**dict(base, input=[write_job(8, "latex")], output=tempfile.mkdtemp(), num_workers=n))
    old_logs = set(glob.glob("/tmp/ray/session_latest/logs/worker-*"))
    t = time.time()
    fleet = RayExecutor(cfg)
    got = fleet.wait_ready()  # every actor (a run itself would start with the first): the whole start
    t_all = time.time()
    stats = fleet.backend_stats()
    rec = {"part": "start", "what": label, "variant": getattr(a, "variant", "default"), "size": a.size,
           "workers": n, "tp": a.tp,
           "first_ready_s": round(min(r for _, _, r in got) - t, 2), "all_ready_s": round(t_all - t, 2),
           "actor_sched_s": [round(i - t, 2) for _, i, _ in got],
           "actor_build_s": [round(r - i, 2) for _, i, r in got],
           "import_s": [s.get("import_seconds") for s in stats], "engine_s": [s.get("engine_seconds") for s in stats],
           **log_facts(logs := worker_logs(old_logs))}
    keep_log(logs, out / f"start-{label.split()[0]}.log")
    emit(out, rec)
    return fleet


def do_runs(fleet, base: dict, runs, out: Path, a, tag: str, deadline: float) -> None:
    from pipeline.run import label

    jobs: dict[tuple[str, int], str] = {}
    for golds, n, gpus, reps in runs:
        for rep in range(reps):
            if time.time() > deadline:
                print(f"skip {golds}{n}@{gpus}: deadline", flush=True)
                return
            inp = jobs.setdefault((golds, n), write_job(n, golds))
            cfg = run_cfg(base, inp, gpus, 8 if n >= 320 else None, f"{n}-{gpus}")
            ex = fleet.borrow(gpus)
            with GpuUtil(gpu_index(fleet, gpus)) as util:
                t = time.time()
                res = label(cfg, executor=ex)
                wall = time.time() - t
            th, counts = res.manifest["throughput"], res.manifest["counts"]
            emit(out, {"part": "run", "set": tag, "variant": getattr(a, "variant", "default"), "size": a.size,
                       "tp": a.tp, "golds": golds, "solutions": n,
                       "gpus": gpus * a.tp, "workers": gpus, "rep": rep, "shards": res.shards_run,
                       "rollouts": counts["rollouts"], "tokens": counts["rollout_tokens"], "wall_s": round(wall, 2),
                       "labeling_s": th.get("labeling_seconds"), "tok_per_s": th["generated_tokens_per_s"],
                       "gpu_util": util.mean, "deterministic": a.deterministic,
                       **timeline_facts(ex.timeline, gpus)})


def gpu_index(fleet, n: int) -> list[int]:
    """NVML indices of the GPUs held by the fleet's first ``n`` actors."""
    import ray

    ids = ray.get([x.gpu_ids.remote() for x in fleet.actors[:n]])
    return sorted(int(i) for g in ids for i in g)


def table(out: Path) -> None:
    rows = [json.loads(x) for x in (out / "fleet.jsonl").read_text().splitlines()]
    for r in rows:
        if r["part"] == "start":
            print("start", {k: v for k, v in r.items() if k not in ("part", "time")})
    runs = [r for r in rows if r["part"] == "run"]
    groups: dict[tuple, list] = {}
    for r in runs:
        var = r.get("variant") or ("det" if r.get("deterministic") else "default")
        groups.setdefault((r["size"], var, r["golds"], r["solutions"], r["gpus"]), []).append(r)
    med = {k: statistics.median(x["tok_per_s"] for x in v) for k, v in groups.items()}
    print(f"\n{'size':5} {'variant':8} {'golds':5} {'sols':>5} {'GPUs':>4} {'reps':>4} {'labeling s':>10} "
          f"{'tok/s':>8} {'eff':>5} {'vs dflt':>7} {'GPU util':>8} {'grade':>6} {'tail s':>6} {'busy':>18}")
    for k, v in groups.items():
        size, var, golds, n, gpus = k
        tps = med[k]
        lab = statistics.median(x["labeling_s"] for x in v)
        base = med.get((size, "default", golds, n, 1))  # efficiency: vs the default 1-GPU rate of the same job
        eff = tps / (base * gpus) if base else float("nan")
        dflt = med.get((size, "default", golds, n, gpus))
        vs = tps / dflt if dflt and var != "default" else float("nan")
        m = sorted(v, key=lambda x: x["tok_per_s"])[len(v) // 2]
        print(f"{size:5} {var:8} {golds:5} {n:5d} {gpus:4d} {len(v):4d} {lab:10.1f} {tps:8.0f} {eff:5.2f} "
              f"{vs:7.2f} {m.get('gpu_util') or 0:7.0f}% {m.get('grade_share') or 0:6.3f} "
              f"{m.get('tail_s') or 0:6.1f} {str(m.get('busy_share')):>18}")


FLEET_VARIANTS = {"default": {}, "inproc": {"vllm_inproc": True}, "det": {"deterministic": True},
                  "tp2": {"tensor_parallel_size": 2}}


def parse_fleets(specs: list[str]) -> list[tuple[str, dict, str]]:
    """'inproc+tp2:96@2x3,96@1' -> [(variant name, config overrides, runs spec)] (one fleet each, in order)."""
    out = []
    for spec in specs:
        name, _, runs = spec.partition(":")
        over: dict = {}
        for v in name.split("+"):
            if v not in FLEET_VARIANTS:
                raise SystemExit(f"bad fleet variant {v!r} (one of {', '.join(FLEET_VARIANTS)})")
            over.update(FLEET_VARIANTS[v])
        parse_runs(runs)  # fail before any GPU time is spent
        out.append((name, over, runs))
    return out


BARE_VARIANTS = {"cold": {}, "warm": {}, "inproc": {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}}


def bare_start(a, mdir: str, tdir: str, out: Path, variant: str = "warm", n: int = 0) -> None:
    """A bare ``vllm.LLM`` start in a subprocess (no Ray); ``variant``: "cold" (label only: the first start on a
    fresh machine), "warm", "inproc" (the engine core in the calling process: VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
    code = f"""
import os, time, json
t0 = time.time()
import vllm
t1 = time.time()
llm = vllm.LLM(model={mdir!r}, tokenizer={tdir!r}, load_format="dummy", dtype="bfloat16", max_model_len=4096,
               gpu_memory_utilization=0.85, enable_prefix_caching=True, seed=0, tensor_parallel_size={a.tp})
t2 = time.time()
print("BARE " + json.dumps({{"import_s": round(t1 - t0, 2), "engine_s": round(t2 - t1, 2)}}), flush=True)
"""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(str(i) for i in range(a.tp)), **BARE_VARIANTS[variant])
    t = time.time()
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=400)
    line = next((x for x in p.stdout.splitlines() if x.startswith("BARE ")), None)
    keep_log([p.stdout + p.stderr], out / f"bare-{n}-{variant}.log")
    rec = {"part": "start", "what": f"bare {variant}", "size": a.size, "tp": a.tp,
           "wall_s": round(time.time() - t, 2), "rc": p.returncode, **log_facts([p.stdout + p.stderr])}
    if line:
        rec.update(json.loads(line[5:]))
    else:
        rec["tail"] = (p.stdout + p.stderr)[-1500:]
    emit(out, rec)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", default="0.5b")
    ap.add_argument("--workers", type=int, default=4, help="actors in the fleet (GPUs / --tp)")
    ap.add_argument("--tp", type=int, default=1, help="tensor parallel size per actor")
    ap.add_argument("--runs", default="640@4,640@2,640@1,96@4x3,96@2x3,96@1")
    ap.add_argument("--warm-runs", default="")
    ap.add_argument("--bare", action="store_true", help="a warm bare engine after the first fleet")
    ap.add_argument("--bare-first", default="", help="bare engine starts before the fleet, e.g. 'cold,warm,inproc'")
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--fleet", action="append", default=[],
                    help="VARIANT:RUNS, repeatable: fleets one after another in this process (replaces --runs and "
                         "--warm-runs); VARIANT = default or '+'-joined inproc, det, tp2")
    ap.add_argument("--deadline-s", type=float, default=540)
    ap.add_argument("--table", action="store_true", help="print the table of OUT/fleet.jsonl and exit")
    a = ap.parse_args()
    if a.table:
        return table(Path(a.out))
    t_start = time.time()
    deadline = t_start + a.deadline_s
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    mdir, tdir = make_model_dir(a.size)
    base = dict(model=mdir, tokenizer=tdir, backend="vllm", executor="ray", k=K, max_new_tokens=MAX_TOKENS,
                load_format="dummy", prompt_template="{problem} ", step_separator=" ", strategy="per-step",
                ignore_eos=True, dtype="bfloat16", max_model_len=4096, tensor_parallel_size=a.tp,
                deterministic=a.deterministic)
    for i, v in enumerate(filter(None, a.bare_first.split(","))):
        bare_start(a, mdir, tdir, out, v, i)
        time.sleep(2)
    fleets = parse_fleets(a.fleet) if a.fleet else (
        [("det" if a.deterministic else "default", {"deterministic": a.deterministic}, a.runs)]
        + ([("default", {"deterministic": a.deterministic}, a.warm_runs)] if a.warm_runs else []))
    for i, (name, over, runs) in enumerate(fleets):
        if i and time.time() > deadline - 90:
            print(f"skip fleet {name}: deadline", flush=True)
            break
        if i:
            time.sleep(3)  # GPU memory given back
        heat = "cold" if i == 0 and not a.bare_first else "warm"
        fbase = dict(base, **over)
        tp = fbase["tensor_parallel_size"]
        va = argparse.Namespace(**dict(vars(a), tp=tp, deterministic=fbase["deterministic"], variant=name))
        fleet = start_fleet(fbase, max(1, a.workers * a.tp // tp), out, f"fleet-{i + 1} {name} ({heat})", va)
        later = len(fleets) - i - 1  # fleets still to start after this one
        try:
            do_runs(fleet, fbase, parse_runs(runs), out, va, f"fleet-{i + 1}",
                    deadline - 90 * later - (40 if a.bare and i == 0 else 0))
        finally:
            fleet.close()
        if a.bare and i == 0 and time.time() < deadline - 40:  # a warm bare engine, the start baseline
            time.sleep(3)
            bare_start(a, mdir, tdir, out)
    print(f"done in {time.time() - t_start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
