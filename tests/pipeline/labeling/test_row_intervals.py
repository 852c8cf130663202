"""The stored 95% intervals cover the true success probability under the sampling each strategy really does:
the real strategy generators, driven with Bernoulli draws of known p, through the real row builder."""

from __future__ import annotations

import random

import pytest

from pipeline.labeling.strategies import ProbeResult, StrategyParams, make_strategy, row_extra
from pipeline.solution import LabeledSolution, Solution
from pipeline.storage.schema import to_record


def _coverage(strategy: str, params: StrategyParams, p: float, n: int, seed: int, steps: int = 6) -> float:
    rng = random.Random(seed)
    sol = Solution(id="s", problem="p", answer="1", steps=tuple(f"s{i}" for i in range(steps)))
    covered = with_iv = 0
    for _ in range(n):
        gen = make_strategy(strategy, steps, False, params)
        try:
            probes = next(gen)
            while True:
                probes = gen.send([ProbeResult(pr.step, pr.n, sum(rng.random() < p for _ in range(pr.n)), 0,
                                               10 * pr.n) for pr in probes])
        except StopIteration as stop:
            oc = stop.value
        rec = to_record(LabeledSolution(sol, oc.labels, oc.stats, oc.first_error, False, rollouts=1,
                                        strategy=strategy, extra=row_extra(oc, params)), params.k)
        for lo, hi in zip(rec["mc_low"][:-1], rec["mc_high"][:-1]):
            if lo is not None:
                with_iv += 1
                covered += lo <= p <= hi
    assert with_iv > n  # most solutions have more than one sampled step
    return covered / with_iv


@pytest.mark.parametrize("strategy,params", [
    ("binary-search", StrategyParams()),  # the defaults: growing waves, early stop
    ("adaptive", StrategyParams(k=20)),
    ("per-step", StrategyParams(k=8)),
])
@pytest.mark.parametrize("p", [0.05, 0.3, 0.7])
def test_stored_intervals_cover_under_each_strategys_sampling(strategy, params, p):
    """Exact intervals cover at >= 95% for every p (conservatively: 0.988-0.997 on these seeded draws), so the
    stated rate is the bar. Intervals computed for equal waves while the probes grew covered 0.88-0.94 at
    p = 0.3 and 0.7."""
    assert _coverage(strategy, params, p, 500, seed=int(p * 100)) >= 0.95
