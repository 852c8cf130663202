"""``mcprm plan``: what a labeling run will cost, from a small pilot run on a random sample of the input.

The pilot is a real :func:`pipeline.run.label` run (in-process executor, the same model, strategy and
settings) on ``pilot`` solutions drawn deterministically (the smallest seeded hashes of their content keys)
from the unique valid solutions of the input. Rollouts and generated tokens per solution are averaged and
multiplied by the input size; the 95% interval is a percentile bootstrap of the pilot mean (2,000 resamples,
seeded). GPU-hours = generated tokens / ``gpu_tokens_per_s`` / 3600: decode throughput only, so prompt
prefill, grading and scheduling overheads come on top. Each engine the run starts also holds its GPU while it
loads: the pilot's own start-up (model or engine load, measured in the pilot run, which starts the same backend)
times ``engines`` is added as ``start_gpu_hours``, and ``gpu_hours_incl_start`` is the sum (a 400-solution job
on one GPU can spend as long starting as labeling).
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import json
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.config import ConfigError, LabelConfig

DEFAULT_PILOT = 32  # solutions in the pilot run
DEFAULT_GPU_TOKENS_PER_S = 20_000.0  # assumed decode throughput of one GPU (batched)


@dataclass
class Estimate:
    per_solution: float
    per_solution_ci: tuple[float, float]
    total: float
    total_ci: tuple[float, float]


@dataclass
class PlanResult:
    solutions: int  # unique valid solutions in the input
    pilot: int  # solutions labeled in the pilot
    model: str
    strategy: str
    k: int
    rollouts: Estimate
    tokens: Estimate
    gpu_hours: Estimate  # from tokens at gpu_tokens_per_s
    start_seconds: float  # the pilot's engine / model start, measured
    engines: int  # engines (GPUs) the run starts, each paying start_seconds
    gpu_hours_incl_start: Estimate  # gpu_hours + engines * start_seconds, per solution and in total
    gpu_tokens_per_s: float
    steps_per_solution: float
    pilot_seconds: float
    pilot_tokens_per_s: float  # this machine's throughput in the pilot (all stages)
    confidence: float = 0.95
    notes: list[str] = field(default_factory=list)
    exact: bool = False  # the pilot labeled the whole input: counts, not estimates

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def bootstrap_ci(xs: list[float], confidence: float = 0.95, n_boot: int = 2000, seed: int = 0
                 ) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``xs``."""
    if not xs:
        raise ValueError("no pilot values")
    if len(xs) == 1:
        return float(xs[0]), float(xs[0])
    rng = random.Random(seed)
    n = len(xs)
    means = sorted(sum(rng.choices(xs, k=n)) / n for _ in range(n_boot))
    lo = means[int((1 - confidence) / 2 * (n_boot - 1))]
    hi = means[int((1 + confidence) / 2 * (n_boot - 1))]
    return float(lo), float(hi)


def _estimate(xs: list[float], n_total: int, confidence: float, seed: int, scale: float = 1.0) -> Estimate:
    """The pilot mean times the input size, with a bootstrap interval; an exact count (a zero-width interval)
    when the pilot labeled every solution of the input (no interval around a known number)."""
    m = sum(xs) / len(xs)
    lo, hi = (m, m) if len(xs) >= n_total else bootstrap_ci(xs, confidence, seed=seed)
    return Estimate(m * scale, (lo * scale, hi * scale), m * n_total * scale, (lo * n_total * scale, hi * n_total * scale))


def sample_solutions(cfg: LabelConfig, pilot: int, seed: int = 0):
    """(number of unique valid solutions, the pilot sample in input order), in the one pass over the input
    that a run makes (:func:`pipeline.input.iter_keyed_solutions`: repeated contents skipped there, with
    compact indexes, so nothing here grows with the input but the ``pilot`` sampled solutions)."""
    from pipeline.input import IngestStats, iter_keyed_solutions
    from pipeline.run.plan import input_spec

    stats = IngestStats()
    heap: list[tuple[int, int, object]] = []  # max-heap on hash via negation: keeps the `pilot` smallest
    solutions = iter_keyed_solutions(input_spec(cfg), cfg.skip_bad, lambda r: None, stats, limit=cfg.limit)
    for i, (key, sol) in enumerate(solutions):
        h = int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:8], "big")
        item = (-h, i, sol)
        if len(heap) < pilot:
            heapq.heappush(heap, item)
        elif -h > heap[0][0]:
            heapq.heapreplace(heap, item)
    sample = [sol for _, _, sol in sorted(heap, key=lambda t: t[1])]
    return stats.solutions, sample


def _plus(e: Estimate, total: float, n_total: int) -> Estimate:
    """``e`` with a fixed ``total`` added (spread over ``n_total`` solutions per solution)."""
    per = total / n_total if n_total else 0.0
    return Estimate(e.per_solution + per, (e.per_solution_ci[0] + per, e.per_solution_ci[1] + per),
                    e.total + total, (e.total_ci[0] + total, e.total_ci[1] + total))


def plan(cfg: LabelConfig, *, pilot: int = DEFAULT_PILOT, gpu_tokens_per_s: float = DEFAULT_GPU_TOKENS_PER_S,
         seed: int = 0, engines: int = 1,
         confidence: float = 0.95, workdir: str | None = None) -> PlanResult:
    """Label a pilot sample of ``cfg.input`` in-process and extrapolate rollouts, tokens and GPU-hours."""
    from pipeline.corpus import read_corpus
    from pipeline.run import label

    if pilot < 2:
        raise ConfigError(f"--pilot must be at least 2 (an interval needs a spread), got {pilot}")
    if gpu_tokens_per_s <= 0:
        raise ConfigError(f"--gpu-tokens-per-s must be positive, got {gpu_tokens_per_s}")
    if engines < 1:
        raise ConfigError(f"--engines must be at least 1, got {engines}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence}")
    cfg = cfg.resolved()
    n_total, sample = sample_solutions(cfg, pilot, seed)
    if not sample:
        raise ConfigError(f"no valid solutions in {', '.join(cfg.input)}; nothing to plan")
    with tempfile.TemporaryDirectory(prefix="mcprm-plan-", dir=workdir) as tmp:
        inp = Path(tmp) / "pilot.jsonl"
        inp.write_text("".join(json.dumps({"id": s.id, "problem": s.problem, "answer": s.answer,
                                           "steps": list(s.steps)}, ensure_ascii=False) + "\n" for s in sample))
        pcfg = cfg.replace(
            input=[str(inp)], output=str(Path(tmp) / "out"), executor="local", limit=None, overwrite=False,
            skip_bad=False, input_format="jsonl", problem_field="problem", answer_field="answer",
            steps_field="steps", solution_field="solution", id_field="id", answer_extract=None, progress=False,
            num_workers=1)
        t0 = time.perf_counter()
        label(pcfg)
        seconds = time.perf_counter() - t0
        t = read_corpus(pcfg.output, columns=["steps", "rollouts", "rollout_tokens"]).to_pylist()
        manifest = json.loads((Path(pcfg.output) / "manifest.json").read_text())
    start = float(manifest.get("throughput", {}).get("startup_seconds") or 0.0)
    rollouts = [float(r["rollouts"]) for r in t]
    tokens = [float(r["rollout_tokens"]) for r in t]
    notes = []
    exact = len(t) >= n_total
    if exact:
        notes.append(f"the pilot labeled all {len(t)} unique valid solutions of the input: rollouts and tokens are "
                     "exact counts of this run, not estimates (GPU-hours still assume the throughput above)")
    if sum(tokens) == 0:
        notes.append("the pilot generated no tokens (e.g. every solution trusted as correct): the estimate is 0")
    gpu_hours = _estimate(tokens, n_total, confidence, seed, scale=1 / gpu_tokens_per_s / 3600)
    return PlanResult(
        solutions=n_total, pilot=len(t), model=cfg.model, strategy=cfg.strategy, k=cfg.k,
        rollouts=_estimate(rollouts, n_total, confidence, seed),
        tokens=_estimate(tokens, n_total, confidence, seed),
        gpu_hours=gpu_hours, start_seconds=start, engines=engines,
        gpu_hours_incl_start=_plus(gpu_hours, engines * start / 3600, n_total),
        gpu_tokens_per_s=gpu_tokens_per_s,
        steps_per_solution=sum(len(r["steps"]) for r in t) / len(t),
        pilot_seconds=seconds, pilot_tokens_per_s=sum(tokens) / seconds if seconds > 0 else 0.0,
        confidence=confidence, notes=notes, exact=exact,
    )
