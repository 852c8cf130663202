"""The first error as a change point, with the model's parameters estimated from the corpus (empirical Bayes).

A solution of ``m`` steps has a true first error ``e`` (``-1``: none). The prefix ending at step ``j`` is
*alive* for ``j < e`` and *dead* for ``j >= e``. A sampled prefix shows ``k`` successes in ``n`` continuations.
The alive prefixes of one solution share one success probability ``qA ~ Beta(aA, bA)`` and its dead prefixes one
``qD ~ Beta(aD, bD)`` (a row effect: how hard the problem is for the model; treating each prefix as an
independent draw of ``p`` made a long row of zeros look like strong evidence of an early error and the stated
confidence anti-calibrated: BENCHMARKS.md, issue 24). The solution's own final answer fixes the support of
``e``: a wrong answer means some step is wrong (``e`` in ``0..m-1``); a right answer means no error (``e = -1``)
with probability ``1 - rho``, else a wrong step before the last that the solution recovered from. For a wrong
answer the prior over ``e`` is geometric with hazard ``h``, the remainder on the last step.

:func:`fit` estimates ``(aA, bA, aD, bD, rho, h)`` by EM over a set of rows (a version's, at commit:
:mod:`pipeline.storage.confidence`) — the E-step is each row's exact posterior over ``e``, the M-step a
weighted maximum-likelihood beta-binomial fit of the alive and dead pools on a fixed grid (deterministic) plus
the closed-form ``rho`` and ``h`` — shrunk towards weak defaults so a small corpus stays sane. :func:`posterior`
is then each row's posterior over ``e``; ``first_error_confidence`` is the posterior probability of the
reported first error.

Counts must be draws of the prefix they are counted at: each continuation is counted once, at the deepest
prefix it reached (see :mod:`pipeline.labeling.scheduler`). The stopping rules of the strategies depend only on
outcomes already seen, so the posterior needs no correction for them (the likelihood principle). How well
the stated confidence matches the truth is measured, not assumed (``bench/bench_calibration.py``,
BENCHMARKS.md): on the bundled task it is **not yet calibrated** — where the model almost never reaches the
answer from any prefix, the counts cannot locate the error and the prior decides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RowCounts:
    """One solution: ``(successes, draws)`` per step (draws 0: not sampled; the last step is never sampled)
    and its own answer's correctness (None: unknown)."""

    counts: tuple[tuple[int, int], ...]
    solution_correct: bool | None


@dataclass(frozen=True)
class Params:
    alive_mean: float = 0.5
    alive_conc: float = 1.0  # a + b of the alive Beta
    dead_mean: float = 0.02
    dead_conc: float = 2.0
    rho: float = 0.1  # P(an error | right final answer)
    hazard: float = 0.25  # P(step j is the first error | no error before), wrong final answer

    def ab(self, alive: bool) -> tuple[float, float]:
        mu, k = (self.alive_mean, self.alive_conc) if alive else (self.dead_mean, self.dead_conc)
        return mu * k, (1.0 - mu) * k


DEFAULT = Params()
# Shrinkage: the defaults count as this many rows' worth of evidence in each M-step.
PRIOR_ROWS = 8.0
_MEANS = [1.0 / (1.0 + math.exp(-x / 4.0)) for x in range(-26, 27)]  # logit grid, 0.0015 .. 0.9985
_CONCS = [0.25 * 1.5 ** i for i in range(16)]  # 0.25 .. 109


def _log_bb(k: int, n: int, a: float, b: float) -> float:
    """log P(k of n | p ~ Beta(a, b)) without the binomial coefficient (it cancels between hypotheses)."""
    return (math.lgamma(k + a) + math.lgamma(n - k + b) - math.lgamma(n + a + b)
            + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b))


def _support(m: int, sc: bool | None) -> list[int]:
    if sc is True:
        return [-1] + list(range(m - 1))
    if sc is False:
        return list(range(m))
    return [-1] + list(range(m))


def _log_prior(e: int, m: int, sc: bool | None, p: Params) -> float:
    def wrong(e: int) -> float:  # geometric hazard over 0..m-2, the rest on m-1
        if e == m - 1:
            return (m - 1) * math.log1p(-p.hazard)
        return e * math.log1p(-p.hazard) + math.log(p.hazard)

    if sc is True:
        return math.log1p(-p.rho) if e == -1 else math.log(p.rho) - math.log(max(1, m - 1))
    if sc is False:
        return wrong(e)
    return math.log(0.5) + (math.log1p(-p.rho) if e == -1 else wrong(e) if e >= 0 else -math.inf)


def _sums(row: RowCounts) -> tuple[list[int], list[int]]:
    pk, pn = [0], [0]
    for k, n in row.counts:
        pk.append(pk[-1] + k)
        pn.append(pn[-1] + n)
    return pk, pn


def posterior(row: RowCounts, p: Params) -> list[float]:
    """P(e | counts) as a list indexed ``e + 1`` (index 0: no error), length ``m + 1``."""
    m = len(row.counts)
    if m == 0:
        return [1.0]
    aA, bA = p.ab(True)
    aD, bD = p.ab(False)
    pk, pn = _sums(row)
    logl = [-math.inf] * (m + 1)
    for e in _support(m, row.solution_correct):
        cut = m if e == -1 else e
        logl[e + 1] = (_log_prior(e, m, row.solution_correct, p) + _log_bb(pk[cut], pn[cut], aA, bA)
                       + _log_bb(pk[m] - pk[cut], pn[m] - pn[cut], aD, bD))
    top = max(logl)
    w = [math.exp(x - top) if x > -math.inf else 0.0 for x in logl]
    z = sum(w)
    return [x / z for x in w]


def _fit_beta(pool: dict[tuple[int, int], float], prior_mean: float, prior_conc: float,
              max_mean: float = 1.0) -> tuple[float, float]:
    """Weighted ML (mean, concentration) of a beta-binomial on the grid, shrunk towards the prior by
    PRIOR_ROWS pseudo-rows (a penalty on the log-distance). A coarse pass, then the neighbourhood of its best."""
    total = sum(pool.values()) or 1.0
    lam = PRIOR_ROWS / (PRIOR_ROWS + total)
    items = [(k, n, w) for (k, n), w in pool.items() if n > 0]

    def score(i: int, j: int) -> float:
        mu, kappa = _MEANS[i], _CONCS[j]
        a, b = mu * kappa, (1 - mu) * kappa
        ll = sum(w * _log_bb(k, n, a, b) for k, n, w in items) / total
        lm = math.log(mu / (1 - mu)) - math.log(prior_mean / (1 - prior_mean))
        lk = math.log(kappa / prior_conc)
        return (1 - lam) * ll - lam * 0.5 * (lm * lm + lk * lk)

    ok = [i for i, mu in enumerate(_MEANS) if mu <= max_mean] or [0]
    seen: dict[tuple[int, int], float] = {}

    def best_of(cands) -> tuple[int, int]:
        for c in cands:
            if c not in seen:
                seen[c] = score(*c)
        return max(cands, key=lambda c: (seen[c], -c[0], -c[1]))

    bi, bj = best_of([(i, j) for i in ok[::4] + [ok[-1]] for j in range(0, len(_CONCS), 3)])
    for _ in range(4):  # local refinement until the best is interior to its neighbourhood
        cands = [(i, j) for i in range(bi - 3, bi + 4) for j in range(bj - 2, bj + 3)
                 if i in ok and 0 <= j < len(_CONCS)]
        ni, nj = best_of(cands)
        if (ni, nj) == (bi, bj):
            break
        bi, bj = ni, nj
    return _MEANS[bi], _CONCS[bj]


def fit(rows: Sequence[RowCounts], iterations: int = 12, start: Params = DEFAULT) -> Params:
    """Empirical-Bayes estimate of :class:`Params` from ``rows`` (see module doc). Deterministic."""
    data = [r for r in rows if any(n > 0 for _k, n in r.counts)]
    p = start
    if not data:
        return p
    for _ in range(iterations):
        alive: dict[tuple[int, int], float] = {}
        dead: dict[tuple[int, int], float] = {}
        rho_num = rho_den = h_events = h_trials = 0.0
        for r in data:
            post = posterior(r, p)
            m = len(r.counts)
            pk, pn = _sums(r)
            for e in range(-1, m):
                w = post[e + 1]
                if w < 1e-6:
                    continue
                cut = m if e == -1 else e
                if pn[cut] > 0:
                    key = (pk[cut], pn[cut])
                    alive[key] = alive.get(key, 0.0) + w
                if pn[m] > pn[cut]:
                    key = (pk[m] - pk[cut], pn[m] - pn[cut])
                    dead[key] = dead.get(key, 0.0) + w
            if r.solution_correct is True:
                rho_num += 1.0 - post[0]
                rho_den += 1.0
            elif r.solution_correct is False and m > 1:
                for j in range(m - 1):
                    h_trials += sum(post[j + 1:])  # P(e >= j)
                    h_events += post[j + 1]
        a_mu, a_k = _fit_beta(alive, DEFAULT.alive_mean, DEFAULT.alive_conc)
        d_mu, d_k = _fit_beta(dead, DEFAULT.dead_mean, DEFAULT.dead_conc, max_mean=0.5 * a_mu)
        rho = (rho_num + PRIOR_ROWS * DEFAULT.rho) / (rho_den + PRIOR_ROWS)
        hz = (h_events + PRIOR_ROWS * DEFAULT.hazard) / (h_trials + PRIOR_ROWS)
        p = Params(a_mu, a_k, d_mu, d_k, min(max(rho, 1e-3), 0.999), min(max(hz, 1e-3), 0.999))
    return p
