"""The corpus's intervals and soft values under each sampling design, checked against the truth by simulation
(fresh draws of known success probabilities), not only against their formulas (issue 24)."""

from __future__ import annotations

import random

import pytest

from pipeline.stats.intervals import (
    FIRST_SUCCESS,
    FIRST_WAVE,
    FIXED,
    clopper_pearson,
    estimate,
    first_success_interval,
    next_wave,
    wilson,
)


def _first_success(p: float, wave: int, cap: int, rng: random.Random,
                   growth: float = 1.0) -> tuple[int, int, int, int]:
    """Waves of ``wave`` draws (each ``growth`` times the last) until a wave has a success or ``cap`` draws:
    (correct, n, first_correct, first_n)."""
    correct = n = 0
    first = None
    while n < cap:
        size = min(next_wave(n, wave, growth), cap - n)
        got = sum(rng.random() < p for _ in range(size))
        correct += got
        n += size
        if first is None:
            first = got
        if got:
            break
    return correct, n, first, wave


@pytest.mark.parametrize("growth,cap", [(1.0, 20), (2.0, 20), (2.0, 7), (3.0, 20)])
@pytest.mark.parametrize("p", [0.01, 0.03, 0.1, 0.3, 0.6, 0.9])
def test_first_success_design_covers_and_its_value_is_unbiased(p, growth, cap):
    """Equal waves and growing ones (issue 29: 2, 4, 8, 6 for K=20), and a cap that cuts a wave (the relative
    drop's lowered K)."""
    rng = random.Random(int(p * 1000) + int(growth * 7) + cap)
    trials, cover, total = 3000, 0, 0.0
    for _ in range(trials):
        c, n, fc, fn = _first_success(p, 2, cap, rng, growth)
        value, (lo, hi) = estimate(FIRST_SUCCESS, c, n, fc, fn, 2, growth)
        cover += lo <= p <= hi
        total += value
    assert cover / trials >= 0.94  # exact intervals cover >= 0.95; 3,000 seeded trials: SE 0.004
    # the first wave's fraction is unbiased: within 4 standard errors of p
    se = (p * (1 - p) / 2 / trials) ** 0.5
    assert abs(total / trials - p) <= 4 * se + 1e-9


def test_the_naive_estimate_under_early_stopping_is_biased():
    """The reason the design matters: c / n over all draws of a stop-at-first-success step is biased upward at
    small p (the bug of issue 24), while the design's estimate is not (test above)."""
    rng = random.Random(7)
    p, trials = 0.05, 4000
    naive = sum(c / n for c, n, _fc, _fn in (_first_success(p, 2, 20, rng) for _ in range(trials))) / trials
    assert naive > 1.5 * p


@pytest.mark.parametrize("p", [0.02, 0.2, 0.7])
@pytest.mark.parametrize("design", [FIXED, FIRST_WAVE])
def test_fixed_batches_cover(p, design):
    rng = random.Random(3)
    trials, cover = 3000, 0
    for _ in range(trials):
        n = 8
        c = sum(rng.random() < p for _ in range(n))
        _v, (lo, hi) = estimate(design, c, n, c, n, n)
        cover += lo <= p <= hi
    assert cover / trials >= 0.94  # exact intervals cover >= 0.95; 3,000 seeded trials: SE 0.004


def test_wilson_undercovers_near_zero_where_clopper_pearson_does_not():
    """Why the corpus stores Clopper-Pearson: at p = 0.02 and n = 8 Wilson's interval misses more than 5%."""
    rng = random.Random(11)
    p, n, trials = 0.02, 8, 4000
    w = cp = 0
    for _ in range(trials):
        c = sum(rng.random() < p for _ in range(n))
        lo, hi = wilson(c, n)
        w += lo <= p <= hi
        lo, hi = clopper_pearson(c, n)
        cp += lo <= p <= hi
    assert cp / trials >= 0.95 and w / trials < 0.95


def test_no_own_draw_no_statement():
    assert estimate(FIRST_SUCCESS, 0, 0, 0, 0, 2) == (None, None)
    assert first_success_interval(0, 0, 2) is None
