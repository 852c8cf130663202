#!/usr/bin/env python3
"""The engine levers side by side on one GPU, in one device call: which vLLM setting keeps the GPU busy.

    PYTHONPATH=/tmp/site:. python3 bench/gpu_levers.py --out OUT [--levers A|B|LIST] [--model PATH] [--deadline-s 560]
    python3 bench/gpu_levers.py table --out OUT          # the table again, from OUT/levers.jsonl

Every lever runs on the same work: ``--prompts`` prompts of ~450 tokens in groups of 8 that share a 300-token
prefix (one solution's step prefixes), ``n=--n`` samples each, each prompt ``--min-tokens``..``--max-tokens`` new
tokens (ignore_eos on random weights, whose samples never stop; the real model stops where it stops), per-request
seeds as mcprm sends them. A lever is one or more atoms joined by ``+``:

* ``eN``: N engine processes on the GPU, each with 0.85/N of its memory, the prompts dealt out by group;
  ``stagger`` starts them one after another (what mcprm does: ``--engines-per-gpu``), else all at once;
* ``seqsN`` / ``mbtN``: ``max_num_seqs`` / ``max_num_batched_tokens``;
* ``graphsN``: CUDA graphs captured up to batch N (``compilation_config.max_cudagraph_capture_size``);
* ``fullgraph``: full CUDA graphs for every batch, mixed prefill-and-decode ones too
  (``compilation_config.cudagraph_mode="FULL"``; vLLM's default captures full graphs for pure decode steps only
  and runs a mixed step piecewise, and a labeling engine, whose sequences end at their own lengths and are
  replaced at once, runs mostly mixed steps);
* ``async`` / ``noasync``: vLLM's async scheduling on / off;
* ``flashinfer``: FlashInfer's sampler (``VLLM_USE_FLASHINFER_SAMPLER=1``; needs the wheel:
  bench/prepare_flashinfer_wheels.sh);
* ``topp``: also time the same prompts with a quarter of the new tokens at ``top_p=1`` (``short``) and at
  ``top_p=0.95`` (``topp``) on the same engines: the PyTorch sampler sorts the vocabulary for top_p;
* ``dp2``: vLLM's own data parallelism (``data_parallel_size=2``) on the one GPU, if vLLM allows it;
* ``mcprm``: the work through mcprm's ``loop`` backend (``VLLMBackend.submit``) instead of ``LLM.generate``;
* ``inproc``: the engine core in the driver's process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``);
* ``label``: ``mcprm label`` itself (Ray executor, ``--engines-per-gpu`` from ``eN``, per-step K=``--n`` on
  ``--label-solutions`` synthetic solutions, the raw levers' mean new tokens, ignore_eos): mcprm beside the raw engine,
  its tokens/s over labeling time and its engine start as the manifest records them;
* ``profile``: where an engine step's time goes: the engine in-process, its scheduler, model runner and output
  processing timed on the host, and a torch-profiler window that sums the GPU kernels' own time.

Each lever runs in fresh processes (the GPU's memory freed between levers). Reported per lever: generated
tokens/s, GPU busy fraction (NVML's utilisation sampled every 50 ms while the work runs), fraction of the
compute roofline (2 x parameters FLOPs per token at the GPU's dense bf16 peak), engine start (process start to
ready, the slowest engine; with ``stagger`` the sum), and errors. Results: OUT/levers.jsonl, a table on stdout.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
               "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}


def set_offline_env() -> None:
    """The GPU machine reaches no network: every engine process (they inherit this environment) stays offline.
    Set when the script runs, never at import, so a process that imports the module keeps its own environment."""
    for k, v in OFFLINE_ENV.items():
        os.environ.setdefault(k, v)

# Three calls' worth of levers (a lever takes 45-110 s: its engines' start, a warm-up, the work; the first start of
# a call pays the compile and model probing), most telling first: a call cut short loses the least.
PRESETS = {
    # engines per GPU against one engine, one engine's own limits, and where a step's time goes
    "A": "base+topp,e2,e4,seqs2048+mbt32768,graphs1024,profile",
    # mcprm itself: `mcprm label` with 1, 2 and 4 engines per GPU (their starts are one after another)
    "B": "label,label+e2,label+e4",
    # the rest: FlashInfer's sampler, three engines, a staggered start, async scheduling off, fewer sequences,
    # graphs with four engines, vLLM's DP, mcprm's loop backend against LLM.generate
    "C": "flashinfer+topp,e3,e2+stagger,noasync,seqs512,e4+graphs1024,dp2,mcprm,mcprm+e2",
    # after A: the best raw configuration (two engines, graphs up to the batch) beside mcprm's loop backend on the
    # same work and beside `mcprm label` with one and two engines at mcprm's defaults (graphs up to the limit)
    "D": "e2+graphs1024,mcprm+e2+graphs1024,label+e2,label",
    # `mcprm label` with one engine and with two on a job large enough to fill two engines' batches (with
    # --label-solutions 400 --lever-s 330): 48 solutions were cut into 8 shards of 6 for two workers, a quarter of
    # one engine's batch each; one engine first, so the call's cold start is not charged to two
    "E": "label,label+e2",
    # with --model (a real model folder) on real solutions' step prefixes: the raw engine's best on the labeling
    # work itself (outputs that stop where the model stops), with and without full graphs for mixed steps
    "F": "e2+graphs1024,e2+graphs1024+fullgraph,seqs2048+mbt32768+graphs2048,seqs2048+mbt32768+graphs2048+fullgraph",
}
# dense bf16 peak FLOP/s (the roofline's ceiling), by a word of the GPU's name
PEAK_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "L4": 121e12}
VOCAB = 151936


# ------------------------------------------------------------------------------------------ the work
def make_work(prompts: int, n: int, min_tokens: int, max_tokens: int, seed: int = 0, real: str | None = None,
              fmt=None):
    """[(prompt text, n, seed, max_tokens, group)]: groups of 8 prompts with a shared 300-token prefix and 150
    tokens of their own (random-weight models: ``wN`` words, one token each with the benchmark tokenizer), or,
    with ``real`` (a JSONL of solutions with problem and steps), step prefixes of real solutions, written as
    ``fmt`` (an mcprm prompt format: the prompts a labeling run sends) or as plain problem-and-steps text."""
    rng = random.Random(seed)
    out = []
    if real:
        from pipeline.labeling.scheduler import derive_seed

        rows = [json.loads(x) for x in open(real) if x.strip()]
        for r in rows:
            steps = r["steps"]
            for i in range(max(1, len(steps) - 1)):
                text = (fmt.prefix(r["problem"], steps[: i + 1]) if fmt is not None
                        else r["problem"].strip() + "\n\n" + "\n\n".join(steps[: i + 1]) + "\n\n")
                out.append((text, n, derive_seed(0, str(r.get("id", len(out))), i, 0),
                            rng.randint(min_tokens, max_tokens), str(r.get("id"))))
                if len(out) >= prompts:
                    return out
        return out

    def words(k):
        return " ".join(f"w{rng.randrange(4, VOCAB)}" for _ in range(k))

    for g in range((prompts + 7) // 8):
        shared = words(300)
        for _ in range(8):
            if len(out) >= prompts:
                break
            out.append((shared + " " + words(150), n, rng.getrandbits(62), rng.randint(min_tokens, max_tokens),
                        f"g{g}"))
    return out


def deal(work, engines: int):
    """The work split over ``engines`` by group (a group's prefix cached on one engine), balanced by tokens."""
    shares = [[] for _ in range(engines)]
    load = [0] * engines
    groups: dict[str, list] = {}
    for w in work:
        groups.setdefault(w[4], []).append(w)
    for g in groups.values():
        i = min(range(engines), key=lambda e: load[e])
        shares[i] += g
        load[i] += sum(x[1] * x[3] for x in g)
    return shares


def parse(lever: str) -> dict:
    """A lever's atoms as settings: engines, engine kwargs, environment, phases and mode."""
    s = {"name": lever, "engines": 1, "stagger": False, "kwargs": {}, "env": {}, "phases": ["main"],
         "mode": "raw"}
    for atom in lever.split("+"):
        if atom == "base":
            continue
        if atom.startswith("e") and atom[1:].isdigit():
            s["engines"] = int(atom[1:])
        elif atom == "stagger":
            s["stagger"] = True
        elif atom.startswith("seqs"):
            s["kwargs"]["max_num_seqs"] = int(atom[4:])
        elif atom.startswith("mbt"):
            s["kwargs"]["max_num_batched_tokens"] = int(atom[3:])
        elif atom.startswith("graphs"):
            s["kwargs"].setdefault("compilation_config", {})["max_cudagraph_capture_size"] = int(atom[6:])
        elif atom == "fullgraph":
            s["kwargs"].setdefault("compilation_config", {})["cudagraph_mode"] = "FULL"
        elif atom in ("async", "noasync"):
            s["kwargs"]["async_scheduling"] = atom == "async"
        elif atom == "flashinfer":
            s["env"]["VLLM_USE_FLASHINFER_SAMPLER"] = "1"
        elif atom == "topp":
            s["phases"] += ["short", "topp"]
        elif atom == "dp2":
            s["kwargs"]["data_parallel_size"] = 2
        elif atom == "mcprm":
            s["mode"] = "mcprm"
        elif atom == "label":
            s["mode"] = "label"
        elif atom == "inproc":
            s["env"]["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        elif atom == "profile":
            s["mode"] = "profile"
            s["env"]["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        else:
            raise SystemExit(f"unknown lever atom {atom!r} in {lever!r} (see the module docstring)")
    if s["engines"] > 1 and s["mode"] != "label":  # (mcprm label splits the memory share itself)
        s["kwargs"]["gpu_memory_utilization"] = round(0.85 / s["engines"], 4)
    return s


# ------------------------------------------------------------------------------------------ one engine (child)
def child(a) -> None:
    """One engine process: start, warm up, say ready, then run each phase when the driver says go."""
    t_proc = float(a.t_proc)
    spec = json.loads(a.spec)
    share = json.loads(Path(a.share).read_text())
    d = Path(a.dir)
    os.environ.update(spec["env"])
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")  # the PyTorch sampler unless the lever asks
    res = {"engine": a.index, "pid": os.getpid()}
    try:
        import vllm
        from vllm import SamplingParams

        kw = dict(model=a.model, tokenizer=a.tokenizer or None, load_format="dummy" if a.dummy else "auto",
                  dtype="bfloat16", max_model_len=4096, seed=0, enable_prefix_caching=True,
                  gpu_memory_utilization=0.85, disable_log_stats=False)
        kw.update(spec["kwargs"])
        backend = None
        if spec["mode"] == "mcprm":
            from rollouts.vllm_backend import VLLMBackend

            mk = dict(kw)
            mk.pop("model")
            mk.pop("disable_log_stats")  # the backend sets it
            backend = VLLMBackend(a.model, engine="loop", **mk)
            llm = backend.llm
        else:
            llm = vllm.LLM(**kw)
        res["vllm"] = vllm.__version__
        res["start_s"] = round(time.time() - t_proc, 1)
        cfg = llm.llm_engine.vllm_config
        res["max_num_seqs"] = cfg.scheduler_config.max_num_seqs
        res["max_num_batched_tokens"] = cfg.scheduler_config.max_num_batched_tokens
        res["async_scheduling"] = getattr(cfg.scheduler_config, "async_scheduling", None)
        res["cudagraph_max"] = getattr(cfg.compilation_config, "max_cudagraph_capture_size", None)
        res["kv_blocks"] = cfg.cache_config.num_gpu_blocks
        res["block_size"] = cfg.cache_config.block_size

        def params(w, top_p):
            return SamplingParams(n=w[1], seed=w[2], max_tokens=w[3], temperature=1.0, top_p=top_p,
                                  ignore_eos=a.dummy, detokenize=not a.dummy)

        rng = random.Random(1000 + a.index)
        warm = [(" ".join(f"w{rng.randrange(4, VOCAB)}" for _ in range(200)) if a.dummy else w[0][::-1],
                 8, i, 32, "warm") for i, w in enumerate(share[:32])]
        for top_p in ([1.0, 0.95] if "topp" in spec["phases"] else [1.0]):
            llm.generate([w[0] for w in warm], [params(w, top_p) for w in warm], use_tqdm=False)
        llm.reset_prefix_cache()
        (d / f"ready.{a.index}").write_text(json.dumps(res))
        for phase in spec["phases"]:
            go = d / f"go.{phase}"
            deadline = time.time() + 900
            while not go.exists():
                if time.time() > deadline:
                    raise TimeoutError(f"no go for phase {phase} in 900 s")
                time.sleep(0.01)
            llm.reset_prefix_cache()
            top_p = 0.95 if phase == "topp" else 1.0
            if phase in ("short", "topp"):  # a quarter of the tokens: top_p's cost at the same sequence count
                share = [(w[0], w[1], w[2], max(16, w[3] // 4), w[4]) for w in json.loads(Path(a.share).read_text())]
            t0 = time.time()
            if spec["mode"] == "profile":
                gen, extra = profiled(llm, share, lambda w, top_p=top_p: params(w, top_p))
                res[f"{phase}_profile"] = extra
            elif backend is not None:
                from rollouts.base import GenRequest, SamplingConfig

                sc = SamplingConfig(temperature=1.0, top_p=top_p, max_new_tokens=max(w[3] for w in share),
                                    ignore_eos=a.dummy)
                # mcprm's backend takes one max_new_tokens per call: one submit per length, all in flight at once
                futs = []
                for L in sorted({w[3] for w in share}):
                    part = [w for w in share if w[3] == L]
                    futs += backend.submit([GenRequest(w[0], w[1], w[2], w[4]) for w in part],
                                           SamplingConfig(temperature=sc.temperature, top_p=sc.top_p,
                                                          max_new_tokens=L, ignore_eos=sc.ignore_eos))
                gen = sum(c.num_tokens for f in futs for c in f.result())
            else:
                outs = llm.generate([w[0] for w in share], [params(w, top_p) for w in share], use_tqdm=False)
                gen = sum(len(c.token_ids) for o in outs for c in o.outputs)
            res[phase] = {"t0": t0, "t1": time.time(), "generated_tokens": gen}
            (d / f"done.{phase}.{a.index}").write_text(json.dumps(res))
        if backend is not None:
            backend.close()
    except BaseException as e:  # noqa: BLE001 - reported in the table, the other levers go on
        import traceback

        res["error"] = f"{type(e).__name__}: {e}"[:600]
        res["traceback"] = traceback.format_exc()[-3000:]
        (d / f"error.{a.index}").write_text(json.dumps(res))
        raise


def profiled(llm, share, params):
    """Run the share with the engine core's parts timed on the host, then a torch-profiler window over part of it;
    (generated tokens, where the time went). Needs the in-process engine (VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
    import torch

    client = llm.llm_engine.engine_core
    core = getattr(client, "engine_core", client)
    timers: dict[str, list] = {}

    def wrap(obj, name, label):
        fn = getattr(obj, name, None)
        if fn is None:
            timers[label + " (not found)"] = [0, 0.0]
            return
        rec = timers.setdefault(label, [0, 0.0])

        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                rec[0] += 1
                rec[1] += time.perf_counter() - t

        setattr(obj, name, timed)

    # the engine core's step is one of these, as its configuration chose (async scheduling: the batch queue one)
    wrap(core, "step_fn", "engine step (all of it)")
    wrap(core, "step", "EngineCore.step")
    wrap(core, "step_with_batch_queue", "EngineCore.step_with_batch_queue")
    wrap(core.scheduler, "schedule", "scheduler.schedule")
    wrap(core.scheduler, "update_from_output", "scheduler.update_from_output")
    wrap(core.model_executor, "execute_model", "executor.execute_model (launch + wait)")
    wrap(core.model_executor, "sample_tokens", "executor.sample_tokens")
    op = getattr(llm.llm_engine, "output_processor", None)
    if op is not None:
        wrap(op, "process_outputs", "output_processor.process_outputs (front end)")
    t0 = time.perf_counter()
    outs = llm.generate([w[0] for w in share], [params(w) for w in share], use_tqdm=False)
    wall = time.perf_counter() - t0
    gen = sum(len(c.token_ids) for o in outs for c in o.outputs)
    host = {k: {"calls": c, "s": round(s, 3), "share_of_wall": round(s / wall, 3),
                "us_per_call": round(1e6 * s / c, 1) if c else None} for k, (c, s) in timers.items()}
    # a torch-profiler window over a quarter of the work: the GPU's own kernel time against the wall clock
    part = share[: max(8, len(share) // 4)]
    llm.reset_prefix_cache()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        t1 = time.perf_counter()
        llm.generate([w[0] for w in part], [params(w) for w in part], use_tqdm=False)
        torch.cuda.synchronize()
        pwall = time.perf_counter() - t1
    # the GPU busy while any kernel runs: the union of the kernels' intervals (streams may overlap)
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    spans = sorted((e.time_range.start, e.time_range.end) for e in kernels)
    kern, end = 0.0, None
    for s0, s1 in spans:
        if end is None or s0 > end:
            kern += s1 - s0
            end = s1
        elif s1 > end:
            kern += s1 - end
            end = s1
    kern /= 1e6
    by_kernel: dict[str, float] = {}
    for e in kernels:
        by_kernel[e.name] = by_kernel.get(e.name, 0.0) + (e.time_range.end - e.time_range.start) / 1e6
    top_gpu = sorted(by_kernel.items(), key=lambda kv: kv[1], reverse=True)[:10]
    top_cpu = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:15]
    return gen, {
        "wall_s": round(wall, 2), "host_timers": host,
        "profiled_wall_s": round(pwall, 2), "gpu_kernel_s": round(kern, 2),
        "gpu_busy_from_kernels": round(kern / pwall, 3) if pwall else None,
        "top_cpu_ops": [(e.key[:80], round(e.self_cpu_time_total / 1e6, 3)) for e in top_cpu],
        "top_gpu_kernels": [(k[:80], round(v, 3)) for k, v in top_gpu],
        "note": "in-process engine: its rate is not the multiprocess engine's; the timers' shares are of the wall",
    }


# ------------------------------------------------------------------------------------------ the driver
class GpuBusy:
    """NVML's utilisation of GPU 0 every 50 ms (nvidia-ml-py, in the GPU image), else nvidia-smi's."""

    def __init__(self):
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            import pynvml

            pynvml.nvmlInit()
            h = pynvml.nvmlDeviceGetHandleByIndex(0)
            while not self._stop.is_set():
                self.samples.append(float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu))
                self._stop.wait(0.05)
        except Exception:  # noqa: BLE001 - no NVML: nvidia-smi, or nothing
            try:
                while not self._stop.is_set():
                    out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,"
                                          "nounits", "-i", "0"], capture_output=True, text=True, timeout=5)
                    self.samples.append(float(out.stdout.strip().splitlines()[0]))
                    self._stop.wait(0.2)
            except Exception:  # noqa: BLE001
                return

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(timeout=10)

    @property
    def busy(self):
        return round(sum(self.samples) / len(self.samples) / 100, 3) if self.samples else None


def gpu_used_bytes() -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used)
    except Exception:  # noqa: BLE001 - no NVML: nvidia-smi
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i",
                                  "0"], capture_output=True, text=True, timeout=10)
            return int(float(out.stdout.strip().splitlines()[0]) * 1024**2)
        except Exception:  # noqa: BLE001
            return None


def wait_gpu_free(limit_s: float = 60.0, below: int = 3 * 1024**3) -> float:
    """Wait (at most ``limit_s``) until the last lever's engine processes have given the GPU's memory back: a
    new engine that finds less free memory than its share refuses to start. Returns the seconds waited."""
    t = time.time()
    while time.time() - t < limit_s:
        used = gpu_used_bytes()
        if used is None or used < below:
            break
        time.sleep(0.5)
    return round(time.time() - t, 1)


def gpu_name() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except Exception:  # noqa: BLE001
        return "unknown"


def roofline(model_dir: str, gpu: str) -> float | None:
    from rollouts.engine_sizing import model_shape, roofline_tokens_per_s

    shape = model_shape(model_dir)
    peak = next((v for k, v in PEAK_FLOPS.items() if k in gpu), None)
    return roofline_tokens_per_s(shape, peak) if shape and peak else None


LABEL_SNIPPET = r"""
import json, sys
sys.path.insert(0, sys.argv[1] + "/bench")
from gpu_workload import workload
from pipeline.config import LabelConfig
from pipeline.run import label
spec, inp, out, model, tok, n, solutions, max_tokens, real = json.loads(sys.argv[2])
with open(inp, "w") as f:
    if tok:  # random weights: synthetic solutions of realistic shape, in the benchmark tokenizer's words
        for s in workload(solutions, seed=1):
            f.write(json.dumps({"id": s.id, "problem": s.problem, "answer": s.answer, "steps": list(s.steps)}) + "\n")
    else:  # a real model: the first real solutions, mcprm's own prompt format
        f.writelines(open(real).readlines()[:solutions])
kw = {k: v for k, v in spec["kwargs"].items() if k in ("max_num_seqs", "max_num_batched_tokens")}
graphs = spec["kwargs"].get("compilation_config", {}).get("max_cudagraph_capture_size")
if graphs is not None:
    kw["cuda_graph_max"] = graphs
if tok:
    kw.update(load_format="dummy", prompt_template="{problem} ", step_separator=" ", ignore_eos=True)
cfg = LabelConfig(input=[inp], output=out, model=model, tokenizer=tok or None, backend="vllm", executor="ray",
                  engines_per_gpu=spec["engines"], k=n, strategy="per-step", max_new_tokens=max_tokens,
                  dtype="bfloat16", max_model_len=4096, progress=False, **kw)
res = label(cfg)
print("LABEL " + json.dumps({"throughput": res.manifest["throughput"], "counts": res.manifest["counts"]}))
"""


def run_label(spec: dict, a, out: Path, budget_s: float) -> dict:
    """``mcprm label`` in a process of its own (its Ray and engines end with it), in a folder removed after it."""
    d = Path(tempfile.mkdtemp(prefix="mcprm-lever-label-"))
    try:
        return _run_label(spec, a, out, budget_s, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _run_label(spec: dict, a, out: Path, budget_s: float, d: Path) -> dict:
    # new tokens: the raw levers' mean length (a label run has one max_new_tokens; random weights never stop)
    args = [spec, str(d / "in.jsonl"), str(d / "out"), a.model, a.tokenizer or "", a.n, a.label_solutions,
            (a.min_tokens + a.max_tokens) // 2, a.solutions]
    with open(out / "levers.log", "a") as log:
        log.write(f"\n===== {spec['name']} (mcprm label) {time.strftime('%H:%M:%S')}\n")
        log.flush()
        p = subprocess.Popen([sys.executable, "-c", LABEL_SNIPPET, str(ROOT), json.dumps(args)], stdout=subprocess.PIPE,
                             stderr=log, text=True, start_new_session=True, env=dict(os.environ, **spec["env"]))
        try:
            stdout, _ = p.communicate(timeout=budget_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
            raise TimeoutError("mcprm label ran out of this call's time") from None
        log.write(stdout[-4000:])
    line = next((x for x in stdout.splitlines() if x.startswith("LABEL ")), None)
    if p.returncode != 0 or line is None:
        raise RuntimeError(f"mcprm label failed (rc {p.returncode}); see levers.log")
    got = json.loads(line[6:])
    th, counts = got["throughput"], got["counts"]
    return {"generated_tokens": counts.get("rollout_tokens"), "seconds": th.get("labeling_seconds"),
            "tok_per_s": th.get("generated_tokens_per_s"), "start_s": th.get("engine_start_seconds"),
            "engine_start_s": th.get("engine_start_seconds"), "wall_s_incl_start": th.get("seconds"),
            "tok_per_s_incl_start": th.get("generated_tokens_per_s_incl_startup"),
            "per_engine_tok_per_s": th.get("engine_tok_per_s_per_worker")}


def run_lever(lever: str, a, work, out: Path, budget_s: float) -> dict:
    spec = parse(lever)
    waited = wait_gpu_free()
    if waited > 1:
        print(f"waited {waited} s for the GPU's memory to be given back before {lever}", flush=True)
    if spec["mode"] == "label":
        rec = {"lever": lever, "engines": spec["engines"], "model": a.model_label, "gpu": a.gpu,
               "prompts": f"{a.label_solutions} solutions", "n": a.n,
               "tokens": str((a.min_tokens + a.max_tokens) // 2)}
        t0 = time.time()
        with GpuBusy() as busy:
            try:
                rec.update(run_label(spec, a, out, budget_s))
            except Exception as e:  # noqa: BLE001 - a row of the table
                rec["error"] = str(e)[:600]
        rec["gpu_busy"] = busy.busy  # over the whole command, engine start included
        roof = roofline(a.model, a.gpu)
        if roof and rec.get("tok_per_s"):
            rec["roofline_tok_per_s"], rec["of_roofline"] = round(roof), round(rec["tok_per_s"] / roof, 3)
        rec["lever_wall_s"] = round(time.time() - t0, 1)
        rec["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with open(out / "levers.jsonl", "a") as f:
            f.write(json.dumps(rec) + "\n")
        print("RESULT " + json.dumps(rec), flush=True)
        return rec
    d = Path(tempfile.mkdtemp(prefix="mcprm-lever-"))
    shares = deal(work, spec["engines"])
    procs = []
    rec = {"lever": lever, "engines": spec["engines"], "model": a.model_label, "gpu": a.gpu,
           "prompts": len(work), "n": a.n, "tokens": f"{a.min_tokens}-{a.max_tokens}"}
    t_start = time.time()
    deadline = t_start + budget_s
    log = open(out / "levers.log", "a")
    log.write(f"\n===== {lever} {time.strftime('%H:%M:%S')}\n")
    log.flush()
    env = dict(os.environ, **spec["env"])

    def start(i):
        (d / f"share.{i}").write_text(json.dumps(shares[i]))
        cmd = [sys.executable, __file__, "_child", "--dir", str(d), "--index", str(i), "--spec", json.dumps(spec),
               "--share", str(d / f"share.{i}"), "--model", a.model, "--tokenizer", a.tokenizer or "",
               "--t-proc", str(time.time())] + (["--dummy"] if a.dummy else [])
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True))

    def wait_for(names, what):
        while True:
            errs = [json.loads(p.read_text()) for p in d.glob("error.*")]
            if errs:
                raise RuntimeError(errs[0]["error"])
            if all((d / x).exists() for x in names):
                return
            if any(p.poll() not in (None, 0) for p in procs):
                raise RuntimeError(f"an engine process exited (rc {[p.poll() for p in procs]}) while {what}; "
                                   "see levers.log")
            if time.time() > deadline:
                raise TimeoutError(f"out of this call's time while {what}")
            time.sleep(0.05)

    try:
        for i in range(spec["engines"]):
            start(i)
            if spec["stagger"]:
                wait_for([f"ready.{i}"], f"engine {i} started")
        wait_for([f"ready.{i}" for i in range(spec["engines"])], "the engines started")
        ready = [json.loads((d / f"ready.{i}").read_text()) for i in range(spec["engines"])]
        rec["start_s"] = round(time.time() - t_start, 1)  # ask to all ready: what a run waits for
        rec["engine_start_s"] = max(r["start_s"] for r in ready)
        for k in ("vllm", "max_num_seqs", "max_num_batched_tokens", "async_scheduling", "cudagraph_max",
                  "block_size"):
            rec[k] = ready[0].get(k)
        # each engine's KV cache: engines started at once measure each other's loading as their own use
        rec["kv_blocks"] = [r.get("kv_blocks") for r in ready]
        rec["engine_start_each_s"] = [r.get("start_s") for r in ready]
        for phase in spec["phases"]:
            with GpuBusy() as busy:
                (d / f"go.{phase}").write_text("")
                wait_for([f"done.{phase}.{i}" for i in range(spec["engines"])], f"phase {phase} ran")
            done = [json.loads((d / f"done.{phase}.{i}").read_text()) for i in range(spec["engines"])]
            t0 = min(x[phase]["t0"] for x in done)
            t1 = max(x[phase]["t1"] for x in done)
            gen = sum(x[phase]["generated_tokens"] for x in done)
            tag = "" if phase == "main" else f"{phase}_"
            rec[f"{tag}generated_tokens"] = gen
            rec[f"{tag}seconds"] = round(t1 - t0, 2)
            rec[f"{tag}tok_per_s"] = round(gen / (t1 - t0), 1)
            rec[f"{tag}gpu_busy"] = busy.busy
            rec[f"{tag}per_engine_tok_per_s"] = [round(x[phase]["generated_tokens"] / (x[phase]["t1"] - x[phase]["t0"]))
                                                for x in done]
            if f"{phase}_profile" in done[0]:
                rec[f"{tag}profile"] = done[0][f"{phase}_profile"]
        roof = roofline(a.model, a.gpu)
        if roof and rec.get("tok_per_s"):
            rec["roofline_tok_per_s"] = round(roof)
            rec["of_roofline"] = round(rec["tok_per_s"] / roof, 3)
    except Exception as e:  # noqa: BLE001 - one lever's failure is a row of the table
        rec["error"] = str(e)[:600]
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        rec["lever_wall_s"] = round(time.time() - t_start, 1)
        log.close()
        shutil.rmtree(d, ignore_errors=True)  # the engines' hand-off files: nothing of a lever outlives it
    rec["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with open(out / "levers.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n")
    print("RESULT " + json.dumps({k: v for k, v in rec.items() if k not in ("profile", "topp_profile")}), flush=True)
    return rec


def topp_ratio(r: dict) -> float:
    """tokens/s at top_p 0.95 over tokens/s at top_p 1, same engines, prompts and lengths."""
    a, b = r.get("topp_tok_per_s"), r.get("short_tok_per_s")
    return a / b if a and b else float("nan")


def table(out: Path) -> None:
    rows = [json.loads(x) for x in (out / "levers.jsonl").read_text().splitlines() if x.strip()]
    if not rows:
        print("no results")
        return
    base = next((r.get("tok_per_s") for r in rows if r["lever"] in ("base", "base+topp") and r.get("tok_per_s")),
                None)
    print(f"\nlevers on {rows[0].get('gpu')} (vLLM {rows[0].get('vllm')}), model {rows[0].get('model')}, "
          f"{rows[0].get('prompts')} prompts x n={rows[0].get('n')}, {rows[0].get('tokens')} new tokens")
    print(f"{'lever':34} {'tok/s':>8} {'x base':>6} {'GPU busy':>8} {'roofline':>8} {'top_p x':>9} "
          f"{'start s':>7} {'seqs':>5} {'graphs':>6}  error")
    for r in rows:
        tps = r.get("tok_per_s")
        print(f"{r['lever'][:34]:34} {tps or 0:8.0f} {(tps / base) if tps and base else float('nan'):6.2f} "
              f"{r.get('gpu_busy') if r.get('gpu_busy') is not None else float('nan'):8.2f} "
              f"{r.get('of_roofline') if r.get('of_roofline') is not None else float('nan'):8.3f} "
              f"{topp_ratio(r):9.2f} {r.get('start_s') or float('nan'):7.1f} "
              f"{r.get('max_num_seqs') or '':>5} {r.get('cudagraph_max') or '':>6}  {r.get('error', '')[:60]}")
    for r in rows:
        p = r.get("profile")
        if not p:
            continue
        print(f"\nwhere a step's time goes ({r['lever']}; {p['note']}): wall {p['wall_s']} s")
        for k, v in p["host_timers"].items():
            print(f"  {k:48} {v['s']:8.2f} s  {v['share_of_wall']:6.1%} of wall  {v['us_per_call'] or 0:9.1f} us/call")
        print(f"  GPU kernels' own time in a profiled window: {p['gpu_kernel_s']} s of {p['profiled_wall_s']} s wall "
              f"= {p['gpu_busy_from_kernels']} busy")
        print("  top host ops: " + "; ".join(f"{k} {s}s" for k, s in p["top_cpu_ops"][:8]))
        print("  top kernels:  " + "; ".join(f"{k} {s}s" for k, s in p["top_gpu_kernels"][:5]))


def main():
    set_offline_env()
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        ap = argparse.ArgumentParser()
        ap.add_argument("_child")
        for f in ("--dir", "--index", "--spec", "--share", "--model", "--tokenizer", "--t-proc"):
            ap.add_argument(f, required=f != "--tokenizer", default="")
        ap.add_argument("--dummy", action="store_true")
        a = ap.parse_args()
        a.index = int(a.index)
        return child(a)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="?", default="run", choices=["run", "table", "list"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--levers", default="A", help="A, B, C, D (presets) or lever,lever,... (atoms joined by +)")
    ap.add_argument("--model", default="", help="a model folder (real weights); default: random weights of --shape")
    ap.add_argument("--shape", default="1.5b", choices=["0.5b", "1.5b", "7b"])
    ap.add_argument("--solutions", default=str(ROOT / "bench/gpu_e2e/solutions400.jsonl"),
                    help="with --model: real solutions whose step prefixes are the prompts")
    ap.add_argument("--prompt-format", default="", help="with --model: write the step prefixes as this mcprm "
                                                        "prompt format (chat, plain, ...), as a labeling run sends them")
    ap.add_argument("--prompt-template", default="", help="with --prompt-format: mcprm's --prompt-template")
    ap.add_argument("--prompts", type=int, default=192)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--min-tokens", type=int, default=256)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--label-solutions", type=int, default=48, help="the label lever's synthetic solutions")
    ap.add_argument("--deadline-s", type=float, default=540, help="stop starting levers after this many seconds")
    ap.add_argument("--lever-s", type=float, default=150, help="the most one lever may take")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.what == "table":
        return table(out)
    levers = PRESETS.get(a.levers, a.levers).split(",")
    if a.what == "list":
        for lv in levers:
            print(lv, parse(lv))
        return
    t_call = time.time()
    a.gpu = gpu_name()
    a.dummy = not a.model
    if a.dummy:
        from gpu_workload import make_model_dir

        if a.shape == "1.5b":
            import gpu_workload

            gpu_workload.SHAPES.setdefault("1.5b", {
                "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 1536,
                "intermediate_size": 8960, "num_hidden_layers": 28, "num_attention_heads": 12,
                "num_key_value_heads": 2, "tie_word_embeddings": True})
        a.model, a.tokenizer = make_model_dir(a.shape)
        atexit.register(shutil.rmtree, a.model, True)  # the random-weights model folder goes with this run
        a.model_label = f"random weights, {a.shape} shape"
        work = make_work(a.prompts, a.n, a.min_tokens, a.max_tokens)
    else:
        a.tokenizer = ""
        a.model_label = a.model
        fmt = None
        if a.prompt_format:
            from rollouts.prompts import make_prompt_format

            fmt = make_prompt_format(a.prompt_format, a.model if a.prompt_format == "chat" else None,
                                     template=a.prompt_template or None)
        work = make_work(a.prompts, a.n, a.min_tokens, a.max_tokens, real=a.solutions, fmt=fmt)
    print(f"{len(levers)} levers on {a.gpu}: {', '.join(levers)}", flush=True)
    for lv in levers:
        left = a.deadline_s - (time.time() - t_call)
        if left < 45:
            print(f"skipped {lv}: {left:.0f} s left in this call", flush=True)
            continue
        # a lever whose engines start one after another (mcprm label's per-GPU lock, `stagger`) gets each
        # further engine's start (~75 s measured) on top of --lever-s
        spec = parse(lv)
        extra = 90 * (spec["engines"] - 1) if spec["stagger"] or spec["mode"] == "label" else 0
        run_lever(lv, a, work, out, min(a.lever_s + extra, left))
    table(out)


if __name__ == "__main__":
    main()
