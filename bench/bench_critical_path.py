"""The critical path of the adaptive strategies: rounds per solution, draws and labels of binary-search
with equal waves vs growing waves vs growing waves + speculation, on success rates recorded from a per-step corpus.

On a GPU a solution's probes wait for one another: each round is one wave of continuations, as long as its
slowest. With a few hundred solutions in flight the job ends when the solution with the most rounds ends, so the
rounds (max and p99 over solutions) are what the GPU waits on; the draws are what it computes. This replays the
real strategy generators (pipeline.labeling.strategies) on each solution's per-prefix success rates estimated from
a per-step corpus (Jeffreys-smoothed own counts; the last step by the solution's own answer), with fresh draws, for
several seeds (no rollout reuse: the draws of a real run are a little fewer). It measures the schedule, not a GPU: the GPU seconds follow from a device run (BENCHMARKS.md).

    mcprm label --input SAMPLE --output PS --strategy per-step --k 8
    python bench/bench_critical_path.py PS --seeds 5
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VARIANTS = {
    "equal waves (the old schedule)": dict(wave_growth=1.0, speculate=False),
    "waves growing 2x": dict(wave_growth=2.0, speculate=False),
    "growing + speculation (default)": dict(wave_growth=2.0, speculate=True),
}


def rates(corpus: str) -> list[tuple[list[float], bool]]:
    from pipeline.corpus import read_corpus

    out = []
    for r in read_corpus(corpus, columns=["mc_correct", "mc_total", "mc_reused", "mc_reused_correct",
                                          "solution_correct", "steps"]).to_pylist():
        ps = [(c - rc + 0.5) / (n - ru + 1.0) for c, n, ru, rc in
              zip(r["mc_correct"], r["mc_total"], r["mc_reused"], r["mc_reused_correct"])]
        ps[-1] = 1.0 if r["solution_correct"] else 0.0
        out.append((ps, bool(r["solution_correct"])))
    return out


def replay(sols, seed: int, **kw) -> dict:
    from pipeline.labeling.strategies import ProbeResult, StrategyParams, make_strategy

    rng = random.Random(seed)
    p = StrategyParams(trust_correct=True, **kw)  # the label command's default for binary-search
    rounds, draws, fes = [], 0, []
    for ps, sc in sols:
        gen = make_strategy("binary-search", len(ps), sc, p)
        n = 0
        try:
            probes = next(gen)
            while True:
                n += 1
                res = []
                for pr in probes:
                    c = sum(rng.random() < ps[pr.step] for _ in range(pr.n))
                    draws += pr.n
                    res.append(ProbeResult(pr.step, pr.n, c, 0, pr.n))
                probes = gen.send(res)
        except StopIteration as stop:
            fes.append(stop.value.first_error)
        rounds.append(n)
    rounds.sort()
    return {"max": rounds[-1], "p99": rounds[int(0.99 * (len(rounds) - 1))], "mean": statistics.fmean(rounds),
            "draws": draws, "first_errors": fes}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("per_step_corpus")
    ap.add_argument("--seeds", type=int, default=5)
    a = ap.parse_args(argv)
    sols = rates(a.per_step_corpus)
    base = None
    print(f"{len(sols)} solutions, {a.seeds} seeds (mean over seeds)\n")
    print("| schedule | max rounds | p99 rounds | mean rounds | draws | rounds (max) vs equal waves | draws vs equal "
          "waves |\n|---|---:|---:|---:|---:|---:|---:|")
    for name, kw in VARIANTS.items():
        rs = [replay(sols, s, **kw) for s in range(a.seeds)]
        row = {k: statistics.fmean(r[k] for r in rs) for k in ("max", "p99", "mean", "draws")}
        base = base or row
        print(f"| {name} | {row['max']:.1f} | {row['p99']:.1f} | {row['mean']:.2f} | {row['draws']:,.0f} | "
              f"{row['max'] / base['max']:.2f}x | {row['draws'] / base['draws']:.2f}x |")


if __name__ == "__main__":
    main()
