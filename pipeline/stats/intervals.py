"""Confidence intervals and unbiased estimates of a prefix's success probability, one per sampling design.

A step's draws come from one of three designs (:data:`DESIGNS`, the row's ``mc_design`` column):

* ``fixed`` — a batch of n draws whose size was fixed before any was seen (per-step; binary-search with
  ``--no-early-stop``). Estimate ``c / n`` (unbiased); interval Clopper-Pearson (coverage >= 95% for every p).
* ``first-success`` — waves of ``w`` draws (each ``growth`` times the last: :func:`wave_bounds`), stopped after the first wave with a success or at a cap
  (adaptive and binary-search with early stop, the defaults). The only unbiased estimate is the first wave's
  success fraction (the Rao-Blackwell estimate given the stopping rule: later waves exist only when the first had
  no success); the interval is exact for the design (:func:`first_success_interval`: outcomes ordered by how
  early the first success came, Clopper-Pearson's construction on that ordering), using every draw.
* ``first-wave`` — any other adaptive design (sequential; adaptive with ``--confidence-width``): estimate and
  Clopper-Pearson interval from the step's first wave alone, a batch fixed before it was seen.

Draws credited by rollout reuse are never part of these: how many of them a step gets can depend on their own
outcomes (a probe of an earlier prefix stops at its first success), so they would bias the estimate.
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054
ALPHA = 0.05
FIXED, FIRST_SUCCESS, FIRST_WAVE = "fixed", "first-success", "first-wave"
DESIGNS = (FIXED, FIRST_SUCCESS, FIRST_WAVE)


def wilson(correct: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """95% Wilson score interval from ``correct`` of ``n`` (None when n == 0). Not exact: it covers less than
    95% near p = 0 at small n; the corpus's intervals are :func:`clopper_pearson` (schema 4)."""
    if n <= 0:
        return None
    phat = correct / n
    denom = 1 + z * z / n
    centre = (phat + z * z / (2 * n)) / denom
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _betacf(a: float, b: float, x: float) -> float:
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > 1e-300 else 1e-300
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > 1e-300 else 1e-300
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-12:
            break
    return h


def beta_cdf(x: float, a: float, b: float) -> float:
    """Regularized incomplete beta I_x(a, b): P(p <= x) for p ~ Beta(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1 - x) / b


def _solve(f, target: float) -> float:
    """The p in [0, 1] where the increasing function ``f`` reaches ``target`` (bisection, 60 steps)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def binom_sf(s: int, n: int, p: float) -> float:
    """P(Binomial(n, p) >= s)."""
    if s <= 0:
        return 1.0
    if s > n:
        return 0.0
    return beta_cdf(p, s, n - s + 1)


def clopper_pearson(correct: int, n: int, alpha: float = ALPHA) -> tuple[float, float] | None:
    """Exact (Clopper-Pearson) interval from ``correct`` of ``n`` fixed-size draws; None when n == 0."""
    if n <= 0:
        return None
    lo = 0.0 if correct <= 0 else _solve(lambda p: binom_sf(correct, n, p), alpha / 2)
    hi = 1.0 if correct >= n else _solve(lambda p: -(1.0 - binom_sf(correct + 1, n, p)), -alpha / 2)
    return lo, hi


def wave_bounds(n: int, wave: int, growth: float = 1.0):
    """The draw counts at which the waves of a first-success probe end, up to the first ``>= n``: waves of
    ``wave``, each ``growth`` times the one before (rounded; 1.0 = equal waves), e.g. 2, 6, 14, 30 for 2 and 2.0.
    The one schedule of the strategies (pipeline.labeling.strategies._estimate) and the intervals below."""
    wave, growth = max(1, int(wave)), max(1.0, float(growth))
    done, i = 0, 0
    while True:
        done += max(1, round(wave * growth ** i))
        i += 1
        yield done
        if done >= n:
            return


def next_wave(done: int, wave: int, growth: float = 1.0) -> int:
    """How many draws the next wave has after ``done`` own draws (to the next end of a wave)."""
    return next(b for b in wave_bounds(done + 1, wave, growth) if b > done) - done


def first_success_waves(n: int, wave: int, growth: float = 1.0) -> tuple[int, int]:
    """(draws before the last wave, size of the last wave) of a first-success probe of ``n`` draws in waves of
    ``wave`` growing by ``growth`` (every wave but the last is whole: a cap on the draws cuts only the last)."""
    if n <= 0:
        return 0, 0
    before = max((b for b in wave_bounds(n, wave, growth) if b < n), default=0)
    return before, n - before


def first_success_interval(correct: int, n: int, wave: int, alpha: float = ALPHA,
                           growth: float = 1.0) -> tuple[float, float] | None:
    """Exact interval for a probe stopped after its first wave with a success (waves of ``wave``) or when its
    draws ran out: ``correct`` successes (all in the last wave) of ``n`` draws. Outcomes are ordered by how much
    success they show (an earlier stopping wave, then more successes in it, is higher); the bounds solve
    P_p(outcome >= observed) = alpha/2 and P_p(outcome <= observed) = alpha/2, which are monotone in p. A cap
    on the draws does not enter: "no success in the first n draws" has probability (1-p)^n whatever came
    after."""
    if n <= 0:
        return None
    if correct <= 0:  # no success in n draws
        return 0.0, 1.0 - (alpha / 2) ** (1.0 / n)
    before, last = first_success_waves(n, wave, growth)

    def at_least(p: float) -> float:  # P(stop earlier) + P(stop in this wave with >= correct successes)
        q = (1.0 - p) ** before
        return 1.0 - q + q * binom_sf(correct, last, p)

    def at_most(p: float) -> float:  # P(no success in the earlier waves) * P(<= correct in this wave)
        return (1.0 - p) ** before * (1.0 - binom_sf(correct + 1, last, p))

    lo = _solve(at_least, alpha / 2)
    hi = 1.0 if correct >= last and before == 0 else _solve(lambda p: -at_most(p), -alpha / 2)
    return lo, hi


def estimate(design: str, own_correct: int, own_n: int, first_correct: int, first_n: int,
             wave: int, growth: float = 1.0) -> tuple[float | None, tuple[float, float] | None]:
    """(unbiased estimate, exact 95% interval) of a step's success probability under ``design`` from its own
    draws (``own_*``) and its first wave (``first_*``); (None, None) when it had no own draw."""
    if own_n <= 0 or (design != FIXED and first_n <= 0):
        return None, None
    if design == FIXED:
        return own_correct / own_n, clopper_pearson(own_correct, own_n)
    if design == FIRST_SUCCESS:
        return first_correct / first_n, first_success_interval(own_correct, own_n, wave, growth=growth)
    if design == FIRST_WAVE:
        return first_correct / first_n, clopper_pearson(first_correct, first_n)
    raise ValueError(f"unknown sampling design {design!r}; one of {', '.join(DESIGNS)}")
