#!/usr/bin/env python3
"""Label fresh solutions once, keep every rollout, replay every strategy on the cache.

``record`` samples one solution per fresh synthetic problem (per seed; what ``mcprm generate --n 1`` does), labels
them with ``per-step`` at K continuations per prefix through the real ``Scheduler`` (hf backend, any device; no
grading there, the replay grades), and keeps every continuation (text, generated tokens) in a gzipped cache file
per seed.

:class:`ReplayBackend` serves those continuations back, in order, to any strategy: the n continuations a request
for prefix p asks for are the next n unserved ones of p's cache. So a strategy at K <= the cached K runs its real
code (``pipeline.labeling.strategies`` through the real ``Scheduler`` and grader) on draws from the same model;
continuation i of a prefix is the i-th cached draw whatever the strategy or K. The live hf backend does not give
that invariance (a request's n samples share one generator that draws n uniforms per decode step, and each wave
of a prefix gets its own seed), so a replayed run is a run with *other* continuations than the live one at the
same settings; both are i.i.d. draws of the same model. ``bench_frontier.py verify`` checks the replay machinery
exactly (a live per-step run, recorded, then replayed: the same labels, counts and tokens) and statistically (a live
binary-search run vs its replay on the same solutions).

    # the recorded data of BENCHMARKS.md: on one GPU (H200), ~2 min per seed; --device cpu works too (~1k tok/s on the shared 2-core box)
    python bench/frontier_cache.py record --sample 20261301:360 --k 64 --device cuda --out bench/out/frontier
    python bench/frontier_cache.py record --sample 20261302:360 --k 64 --device cuda --out bench/out/frontier
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rollouts.base import Completion, Counters  # noqa: E402

MAX_NEW_TOKENS = 160


def load_solutions(path: Path):
    from pipeline.solution import Solution

    out = []
    for n, line in enumerate(path.read_text().splitlines()):
        r = json.loads(line)
        out.append(Solution(id=str(r["id"]), problem=r["problem"], answer=str(r["answer"]), steps=tuple(r["steps"]),
                            source=f"{path.name}:{n}"))
    return out


def make_cfg(solutions: Path, out: Path, strategy: str = "per-step", k: int = 16, seed: int = 0, **kw):
    from pipeline.config import LabelConfig

    return LabelConfig(input=[str(solutions)], output=str(out), strategy=strategy, k=k, seed=seed, executor="local",
                       num_workers=1, cpus_per_worker=2, progress=False, max_new_tokens=MAX_NEW_TOKENS,
                       **kw).resolved()


class RecordingBackend:
    """Wraps a live backend; keeps every completion per (group, prompt), in the order they were generated."""

    def __init__(self, inner, cache: dict):
        self.inner = inner
        self.name = f"recording({inner.name})"
        self.streaming = False
        self.cache = cache
        self.stats = getattr(inner, "stats", Counters())

    def generate(self, reqs, sampling):
        got = self.inner.generate(reqs, sampling)
        for r, comps in zip(reqs, got):
            self.cache.setdefault(f"{r.group}\x00{r.prompt}", []).extend([c.text, c.num_tokens] for c in comps)
        return got

    def close(self):
        self.inner.close()


class ReplayBackend:
    """Serves cached continuations: a request for prefix p gets the next ``n`` unserved ones of p."""

    name = "replay"
    streaming = False

    def __init__(self, cache: dict):
        self.cache = cache
        self.pos: dict[str, int] = {}
        self.stats = Counters()

    def generate(self, reqs, sampling):
        out = []
        for r in reqs:
            key = f"{r.group}\x00{r.prompt}"
            have = self.cache.get(key)
            at = self.pos.get(key, 0)
            if have is None or at + r.n > len(have):
                raise RuntimeError(f"replay cache exhausted: {at + r.n} continuations wanted, "
                                   f"{0 if have is None else len(have)} cached")
            self.pos[key] = at + r.n
            out.append([Completion(t, int(n)) for t, n in have[at : at + r.n]])
        return out

    def close(self):
        pass


def label_with(cfg, solutions, backend):
    """The real worker code (Scheduler + strategy + grader) on ``backend``; returns LabeledSolutions."""
    from pipeline.execution.shard_worker import ShardWorker

    w = ShardWorker(cfg, backend=backend)
    labeled, _ = w.label(solutions)
    return labeled


def write_cache(path: Path, data: dict) -> None:
    import gzip

    with gzip.open(path, "wt") as f:
        json.dump(data, f)


def read_cache(path: Path) -> dict:
    import gzip

    with gzip.open(path, "rt") as f:
        return json.load(f)


def sample_with(backend, prompt, sampling, seed: int, n: int, out: Path) -> Path:
    """One solution per fresh problem of ``generate_problems(n, seed)``: what ``mcprm generate --n 1`` does
    (pipeline.commands.generate: same prompt, request seed and step split), on a backend already built."""
    from pipeline.bundled.generator import generate_problems
    from pipeline.bundled.synthetic import check_steps
    from pipeline.labeling.scheduler import derive_seed
    from rollouts.base import GenRequest

    probs = generate_problems(n, seed=seed)
    reqs = [GenRequest(prompt.prefix(p["problem"], []), 1, derive_seed(seed, p["id"], -1, 0), p["id"]) for p in probs]
    t = time.perf_counter()
    outs = backend.generate(reqs, sampling)
    lines, errs = [], 0
    for p, comps in zip(probs, outs):
        steps = [x.strip() for x in comps[0].text.split(prompt.separator) if x.strip()]
        if not steps:
            continue
        errs += check_steps(p["problem"], steps).first_error != -1
        lines.append(json.dumps({"id": f"{p['id']}-0", "problem_id": p["id"], "problem": p["problem"],
                                 "answer": p["answer"], "steps": steps, "finish_reason": comps[0].finish_reason}))
    path = out / f"solutions-{seed}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    print(f"seed {seed}: sampled {len(lines)} solutions ({errs} with an error) in {time.perf_counter() - t:.0f} s",
          flush=True)
    return path


def record(a) -> None:
    """Per-step at K over a solutions file on any device, keeping every continuation (no grading: the replay
    grades). Light imports only (no pyarrow / graders), so it runs on a bare GPU image with torch+transformers."""
    import types

    from pipeline import bundled
    from pipeline.config import LabelConfig
    from pipeline.labeling.scheduler import Scheduler, SchedulerSettings
    from pipeline.labeling.strategies import StrategyParams
    from rollouts.base import SamplingConfig
    from rollouts.hf import HFBackend
    from rollouts.prompts import make_prompt_format

    d = LabelConfig()
    prompt = make_prompt_format(d.prompt_format, None, template=d.prompt_template, separator=d.step_separator)
    sampling = SamplingConfig(temperature=d.temperature, top_p=d.top_p, max_new_tokens=MAX_NEW_TOKENS,
                              stop=tuple(getattr(prompt, "stop", ()) or ()), ignore_eos=d.ignore_eos)
    hf = HFBackend(str(bundled.model_dir()), device=a.device, dtype=a.dtype, max_batch_rows=a.max_batch_rows)
    files = a.files.split(",") if a.files else []
    for spec in (a.sample.split(",") if a.sample else []):  # SEED:N -> solutions-SEED.jsonl
        seed, n = (int(x) for x in spec.split(":"))
        files.append(str(sample_with(hf, prompt, sampling, seed, n, Path(a.out))))
    for f in files:
        sols = load_solutions(Path(f))
        data = {"k": a.k, "run_seed": a.run_seed, "device": a.device, "dtype": a.dtype, "cache": {}}
        rec = RecordingBackend(hf, data["cache"])

        def no_grade(pairs):
            return [types.SimpleNamespace(correct=None) for _ in pairs]

        sched = Scheduler(rec, no_grade, prompt, SchedulerSettings(
            "per-step", StrategyParams(k=a.k), sampling=sampling, seed=a.run_seed,
            max_batch_requests=a.max_batch_requests))
        t = time.perf_counter()
        labeled = sched.label(sols)
        data["seconds"] = time.perf_counter() - t
        data["tokens"] = sum(x.rollout_tokens for x in labeled)
        out = Path(a.out) / ("cache-" + Path(f).stem.replace("solutions-", "") + ".json.gz")
        write_cache(out, data)
        print(f"{f}: per-step K={a.k} on {len(sols)} solutions, {data['tokens']} tokens in {data['seconds']:.0f} s "
              f"({data['tokens'] / data['seconds']:.0f} tok/s) -> {out}", flush=True)


def light_grade(pairs):
    """The bundled task's answers only (``\\boxed{}`` value == gold by exact value): no sympy worker processes,
    so it runs on a bare GPU image. Used for the live-vs-replay comparison on both sides."""
    import types

    from graders.extract import extract_answer
    from pipeline.bundled.synthetic import parse_latex_value

    out = []
    for gold, text in pairs:
        ans = extract_answer(text, fallback=False)
        if ans is None:
            out.append(types.SimpleNamespace(correct=False, no_answer=True))
            continue
        v, g = parse_latex_value(ans), parse_latex_value(str(gold))
        out.append(types.SimpleNamespace(correct=v is not None and v == g, no_answer=False))
    return out


def live(a) -> None:
    """Live runs (no replay) of strategies on a solutions file, on any device, with the real grader: the
    labels, counts and tokens per solution, for ``bench_frontier.py compare`` against the replay."""
    import functools

    from graders import GraderConfig, grade_batch
    from pipeline import bundled
    from pipeline.config import LabelConfig
    from pipeline.labeling.scheduler import ProblemGrader, Scheduler, SchedulerSettings
    from pipeline.labeling.strategies import StrategyParams
    from rollouts.base import SamplingConfig
    from rollouts.hf import HFBackend
    from rollouts.prompts import make_prompt_format

    d = LabelConfig()
    prompt = make_prompt_format(d.prompt_format, None, template=d.prompt_template, separator=d.step_separator)
    sampling = SamplingConfig(temperature=d.temperature, top_p=d.top_p, max_new_tokens=MAX_NEW_TOKENS,
                              stop=tuple(getattr(prompt, "stop", ()) or ()), ignore_eos=d.ignore_eos)
    hf = HFBackend(str(bundled.model_dir()), device=a.device, dtype=a.dtype, max_batch_rows=a.max_batch_rows)
    grade = (light_grade if a.light_grader else
             ProblemGrader(functools.partial(grade_batch, config=GraderConfig(timeout_s=d.grader_timeout, workers=1),
                                             grader=d.grader)))
    sols = load_solutions(Path(a.file))[: a.n]
    out = {}
    for spec in a.runs.split(","):  # STRATEGY:K
        strategy, k = spec.split(":")
        c = LabelConfig(strategy=strategy, k=int(k))
        sp = StrategyParams(k=c.k, wave_size=c.wave_size, confidence_width=c.confidence_width,
                            trust_correct=c.effective_trust_correct(), early_stop=c.early_stop,
                            target_confidence=c.target_confidence, max_tokens_per_solution=c.max_tokens_per_solution)
        sched = Scheduler(hf, grade, prompt, SchedulerSettings(strategy, sp, sampling=sampling, seed=a.run_seed,
                                                               max_batch_requests=a.max_batch_requests))
        t = time.perf_counter()
        labeled = sched.label(sols)
        out[spec] = [{"id": x.solution.id, "labels": x.labels, "first_error": x.first_error, "rollouts": x.rollouts,
                      "rollout_tokens": x.rollout_tokens, "mc_correct": [st.correct for st in x.stats],
                      "mc_total": [st.total for st in x.stats]} for x in labeled]
        print(f"live {spec} on {len(sols)} solutions: {sum(x.rollout_tokens for x in labeled)} tokens in "
              f"{time.perf_counter() - t:.0f} s", flush=True)
    Path(a.out).write_text(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--files", default="", help="comma-separated solutions JSONL files")
    r.add_argument("--sample", default="", help="comma-separated SEED:N: sample N fresh solutions per seed first")
    r.add_argument("--k", type=int, default=64)
    r.add_argument("--run-seed", type=int, default=0)
    r.add_argument("--device", default="cuda")
    r.add_argument("--dtype", default="float32")
    r.add_argument("--max-batch-rows", type=int, default=4096)
    r.add_argument("--max-batch-requests", type=int, default=4096)
    r.add_argument("--out", default="bench/out/frontier")
    v = sub.add_parser("live")
    v.add_argument("--file", required=True)
    v.add_argument("--n", type=int, default=10**9)
    v.add_argument("--runs", default="per-step:8,binary-search:22")
    v.add_argument("--run-seed", type=int, default=7)
    v.add_argument("--device", default="cuda")
    v.add_argument("--dtype", default="float32")
    v.add_argument("--max-batch-rows", type=int, default=4096)
    v.add_argument("--max-batch-requests", type=int, default=4096)
    v.add_argument("--out", required=True)
    v.add_argument("--light-grader", action="store_true", help="frontier_cache.light_grade (no sympy workers)")
    a = ap.parse_args()
    if a.cmd == "live":
        live(a)
    elif a.cmd == "record":
        record(a)


if __name__ == "__main__":
    main()
