"""The first error as a change point, with the model's parameters estimated from the corpus (empirical Bayes).

A solution of ``m`` steps has a true first error ``e`` (``-1``: none). The prefix ending at step ``j`` is
*alive* for ``j < e`` and *dead* for ``j >= e``. A sampled prefix shows ``k`` successes in ``n`` continuations.

* **Alive prefixes** share the solution's per-step reliability ``s`` (how likely the model is to do one more
  step right on this problem): from a correct prefix with ``r`` steps still to write, a continuation reaches
  the answer with probability ``s ** r``. ``s`` varies between problems; its distribution is estimated from
  the corpus as a discrete distribution on a fixed grid (a nonparametric maximum-likelihood mixing
  distribution), **one per solution length** (:func:`length_bucket`; longer solutions are usually of harder
  problems, with a lower ``s``), each shrunk towards the pooled one. So a long row of zeros early in a hard
  problem is what an alive prefix does, not evidence of an error, and a success near the end says little
  about the start.
* **Dead prefixes** share one recovery probability ``qD ~ Beta(aD, bD)`` (a wrong step that the model
  sometimes repairs).
* **The prior over ``e``**: a wrong final answer means some step is wrong; step ``j`` is the first wrong one,
  given none before it, with the hazard ``h_j`` (one per position for the first :data:`HAZARDS` positions, the
  last shared by later ones), the remainder on the last step. A right final answer means no error with
  probability ``1 - rho``, else one wrong step before the last (recovered from), uniformly.

Independent prefixes with one Beta for every alive prefix (the first version of this model) stated 0.85 on
rows that were right 20% of the time on the bundled task; this one is measured in BENCHMARKS.md ("labels that tell the truth about themselves").
One mixing distribution for every length (``changepoint-eb-2``) stated ~0.33 on the all-failure rows of long
solutions that were right ~0.15: their zeros were read as an early error where a long hard problem was alive.

:func:`fit` estimates the parameters by EM over a set of rows (a version's, at commit:
:mod:`pipeline.storage.confidence`) — the E-step is each row's exact joint posterior over ``(e, s)``, the M-step
the mixing weights, a weighted maximum-likelihood beta-binomial fit of the dead pool on a fixed grid
(deterministic), and closed-form ``rho`` and hazards — shrunk towards weak defaults by :data:`PRIOR_ROWS`
pseudo-rows so a small corpus stays sane. :func:`posterior` is each row's posterior over ``e``;
``first_error_confidence`` is the posterior probability of the reported first error.

Counts must be draws of the prefix they are counted at: each continuation is counted once, at the deepest
prefix it reached (``mc_deep_*``; see :mod:`pipeline.labeling.scheduler`). The strategies' stopping rules
depend only on outcomes already seen, so the posterior needs no correction for them (the likelihood
principle). What this model assumes is what its calibration is measured against: ``bench/bench_calibration.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache

# the per-step reliability grid: 34 points, logit-spaced from 0.018 to 0.999
GRID = tuple(1.0 / (1.0 + math.exp(-x / 3.0)) for x in range(-12, 22))
HAZARDS = 6  # positions with their own hazard (0..4), the last for every later position
DEAD_PREFIX_RATE = 0.02  # how often a dead prefix still reaches the gold answer by luck: the one default (options)
PRIOR_ROWS = 8.0  # shrinkage: the defaults count as this many rows' worth of evidence in each M-step
LENGTH_BUCKETS = 8  # mixing distributions of s: solutions of <= 2, 3, ..., 8, >= 9 steps
_MAX_R = 64  # remaining steps beyond this use this (s ** 64 is 0 for every grid point but the top few)
# How much the last step (the answer) costs, in steps: a correct prefix with r steps to go succeeds with
# s ** (r - 1 + offset). 0: stating the answer is free once the work is done (a bare "The answer is 14."), 1: the
# last step is a step like the others (it also computes). Chosen per corpus by marginal likelihood.
OFFSETS = (0.0, 0.5, 1.0)
_TOP = 1 - 1e-3  # an alive prefix's success probability is at most this (nothing is certain)


def length_bucket(m: int) -> int:
    """Which mixing distribution of ``s`` a solution of ``m`` steps uses."""
    return min(max(m, 2), LENGTH_BUCKETS + 1) - 2


def _uniform() -> tuple[float, ...]:
    return tuple([1.0 / len(GRID)] * len(GRID))


@cache
def _tables(offset: float) -> tuple[list[list[float]], list[list[float]]]:
    """log p and log(1 - p) of an alive prefix with r steps to go, per grid point, for r = 0.._MAX_R."""
    log_p, log_q = [], []
    for r in range(_MAX_R + 1):
        x = max(r - 1 + offset, 0.0)
        ps = [min(s ** x, _TOP) for s in GRID]
        log_p.append([math.log(p) for p in ps])
        log_q.append([math.log1p(-p) for p in ps])
    return log_p, log_q


@dataclass(frozen=True)
class RowCounts:
    """One solution: ``(successes, draws)`` per step (draws 0: not sampled; the last step is never sampled)
    and its own answer's correctness (None: unknown)."""

    counts: tuple[tuple[int, int], ...]
    solution_correct: bool | None


@dataclass(frozen=True)
class Params:
    # the mixing distribution of s per length bucket (length_bucket): LENGTH_BUCKETS tuples over GRID
    weights: tuple[tuple[float, ...], ...] = field(default_factory=lambda: (_uniform(),) * LENGTH_BUCKETS)
    dead_mean: float = DEAD_PREFIX_RATE
    dead_conc: float = 2.0
    rho: float = 0.1  # P(an error | right final answer)
    hazards: tuple[float, ...] = (0.25,) * HAZARDS
    offset: float = 1.0  # the answer step's cost in steps (OFFSETS)

    def to_dict(self) -> dict:
        return {"weights": [[round(w, 8) for w in ws] for ws in self.weights], "dead_mean": round(self.dead_mean, 8),
                "dead_conc": round(self.dead_conc, 8), "rho": round(self.rho, 8),
                "hazards": [round(h, 8) for h in self.hazards], "offset": self.offset}

    @classmethod
    def from_dict(cls, d: dict) -> Params:
        raw = d["weights"]
        if raw and not isinstance(raw[0], list):  # changepoint-eb-2: one distribution for every length
            raw = [raw] * LENGTH_BUCKETS
        w = tuple(tuple(float(x) for x in ws) for ws in raw)
        if len(w) != LENGTH_BUCKETS or any(len(ws) != len(GRID) for ws in w) or len(d["hazards"]) != HAZARDS:
            raise ValueError("first-error model parameters of another grid")
        return cls(w, float(d["dead_mean"]), float(d["dead_conc"]), float(d["rho"]),
                   tuple(float(h) for h in d["hazards"]), float(d.get("offset", 1.0)))


DEFAULT = Params()


def _log_bb(k: int, n: int, a: float, b: float) -> float:
    """log P(k of n | p ~ Beta(a, b)) without the binomial coefficient (it cancels between hypotheses)."""
    return (math.lgamma(k + a) + math.lgamma(n - k + b) - math.lgamma(n + a + b)
            + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b))


def _sums(row: RowCounts) -> tuple[list[int], list[int]]:
    pk, pn = [0], [0]
    for k, n in row.counts:
        pk.append(pk[-1] + k)
        pn.append(pn[-1] + n)
    return pk, pn


def _support(m: int, sc: bool | None) -> list[int]:
    if sc is True:
        return [-1] + list(range(m - 1))
    if sc is False:
        return list(range(m))
    return [-1] + list(range(m))


def _log_prior(e: int, m: int, sc: bool | None, p: Params) -> float:
    def wrong(e: int) -> float:  # position hazards over 0..m-2, the rest on m-1
        lp = sum(math.log1p(-p.hazards[min(j, HAZARDS - 1)]) for j in range(e))
        return lp if e == m - 1 else lp + math.log(p.hazards[min(e, HAZARDS - 1)])

    if sc is True:
        return math.log1p(-p.rho) if e == -1 else math.log(p.rho) - math.log(max(1, m - 1))
    if sc is False:
        return wrong(e)
    return math.log(0.5) + (math.log1p(-p.rho) if e == -1 else wrong(e))


def _alive_cumulative(row: RowCounts, offset: float) -> list[list[float]]:
    """``A[c][g]``: log-likelihood of steps ``0..c-1`` alive under reliability ``GRID[g]``."""
    m = len(row.counts)
    log_p, log_q = _tables(offset)
    acc = [0.0] * len(GRID)
    out = [acc]
    for j, (k, n) in enumerate(row.counts):
        if n > 0:
            r = min(max(1, m - 1 - j), _MAX_R)
            ls, l1 = log_p[r], log_q[r]
            acc = [a + k * x + (n - k) * y for a, x, y in zip(acc, ls, l1)]
        out.append(acc)
    return out


def _joint(row: RowCounts, p: Params) -> dict[int, list[float]]:
    """log P(e, s = GRID[g], counts) for every ``e`` of the support: ``{e: [per grid point]}``."""
    m = len(row.counts)
    pk, pn = _sums(row)
    alive = _alive_cumulative(row, p.offset)
    lw = [math.log(w) if w > 0 else -1e300 for w in p.weights[length_bucket(m)]]
    aD, bD = p.dead_mean * p.dead_conc, (1 - p.dead_mean) * p.dead_conc
    out = {}
    for e in _support(m, row.solution_correct):
        cut = m if e == -1 else e
        base = _log_prior(e, m, row.solution_correct, p) + _log_bb(pk[m] - pk[cut], pn[m] - pn[cut], aD, bD)
        out[e] = [base + w + a for w, a in zip(lw, alive[cut])]
    return out


def posterior(row: RowCounts, p: Params) -> list[float]:
    """P(e | counts) as a list indexed ``e + 1`` (index 0: no error), length ``m + 1``."""
    m = len(row.counts)
    if m == 0:
        return [1.0]
    joint = _joint(row, p)
    top = max(max(v) for v in joint.values())
    post = [0.0] * (m + 1)
    for e, v in joint.items():
        post[e + 1] = sum(math.exp(x - top) for x in v)
    z = sum(post)
    return [x / z for x in post]


_MEANS = [1.0 / (1.0 + math.exp(-x / 4.0)) for x in range(-26, 27)]  # logit grid, 0.0015 .. 0.9985
_CONCS = [0.25 * 1.5 ** i for i in range(16)]  # 0.25 .. 109


def _fit_beta(pool: dict[tuple[int, int], float], prior_mean: float, prior_conc: float) -> tuple[float, float]:
    """Weighted ML (mean, concentration) of a beta-binomial on the grid, shrunk towards the prior by
    PRIOR_ROWS pseudo-rows (a penalty on the log-distance). A coarse pass, then the neighbourhood of its best."""
    total = sum(pool.values()) or 1.0
    lam = PRIOR_ROWS / (PRIOR_ROWS + total)
    items = [(k, n, w) for (k, n), w in pool.items() if n > 0]
    seen: dict[tuple[int, int], float] = {}

    def score(i: int, j: int) -> float:
        if (i, j) not in seen:
            mu, kappa = _MEANS[i], _CONCS[j]
            a, b = mu * kappa, (1 - mu) * kappa
            ll = sum(w * _log_bb(k, n, a, b) for k, n, w in items) / total
            lm = math.log(mu / (1 - mu)) - math.log(prior_mean / (1 - prior_mean))
            lk = math.log(kappa / prior_conc)
            seen[(i, j)] = (1 - lam) * ll - lam * 0.5 * (lm * lm + lk * lk)
        return seen[(i, j)]

    def best_of(cands: list[tuple[int, int]]) -> tuple[int, int]:
        return max(cands, key=lambda c: (score(*c), -c[0], -c[1]))

    bi, bj = best_of([(i, j) for i in range(0, len(_MEANS), 4) for j in range(0, len(_CONCS), 3)])
    for _ in range(6):  # local refinement until the best is interior to its neighbourhood
        ni, nj = best_of([(i, j) for i in range(bi - 3, bi + 4) for j in range(bj - 2, bj + 3)
                          if 0 <= i < len(_MEANS) and 0 <= j < len(_CONCS)])
        if (ni, nj) == (bi, bj):
            break
        bi, bj = ni, nj
    return _MEANS[bi], _CONCS[bj]


def log_marginal(rows: Sequence[RowCounts], p: Params) -> float:
    """log P(counts | p) of ``rows``: what :func:`fit` compares the answer-step offsets by."""
    total = 0.0
    for r in rows:
        if not r.counts:
            continue
        joint = _joint(r, p)
        top = max(max(v) for v in joint.values())
        total += top + math.log(sum(math.exp(x - top) for v in joint.values() for x in v))
    return total


def fit(rows: Sequence[RowCounts], iterations: int = 20, start: Params = DEFAULT) -> Params:
    """Empirical-Bayes estimate of :class:`Params` from ``rows`` (see module doc): EM for each answer-step
    offset of :data:`OFFSETS`, the one with the highest marginal likelihood. Deterministic."""
    data = [r for r in rows if any(n > 0 for _k, n in r.counts)]
    if not data:
        return start
    fits = [_em(data, iterations, replace(start, offset=o)) for o in OFFSETS]
    return max(fits, key=lambda p: (log_marginal(data, p), -p.offset))


def _em(data: Sequence[RowCounts], iterations: int, p: Params) -> Params:
    ng = len(GRID)
    for _ in range(iterations):
        weights = [[0.0] * ng for _ in range(LENGTH_BUCKETS)]
        dead: dict[tuple[int, int], float] = {}
        rho_num = rho_den = 0.0
        h_events, h_trials = [0.0] * HAZARDS, [0.0] * HAZARDS
        for r in data:
            joint = _joint(r, p)
            top = max(max(v) for v in joint.values())
            m = len(r.counts)
            pk, pn = _sums(r)
            post = [0.0] * (m + 1)
            resp = {e: [math.exp(x - top) for x in v] for e, v in joint.items()}
            z = sum(sum(v) for v in resp.values())
            wb = weights[length_bucket(m)]
            for e, v in resp.items():
                pe = sum(v) / z
                post[e + 1] = pe
                for g, x in enumerate(v):
                    wb[g] += x / z
                cut = m if e == -1 else e
                if pn[m] > pn[cut] and pe > 1e-9:
                    key = (pk[m] - pk[cut], pn[m] - pn[cut])
                    dead[key] = dead.get(key, 0.0) + pe
            if r.solution_correct is True:
                rho_num += 1.0 - post[0]
                rho_den += 1.0
            elif r.solution_correct is False and m > 1:
                tail = 1.0  # P(e >= j)
                for j in range(m - 1):
                    i = min(j, HAZARDS - 1)
                    h_trials[i] += tail
                    h_events[i] += post[j + 1]
                    tail -= post[j + 1]
        # pooled over lengths (shrunk towards uniform), then each length's shrunk towards the pooled
        pooled_w = [sum(ws[g] for ws in weights) for g in range(ng)]
        n_all = sum(pooled_w)
        pooled_w = [(x + PRIOR_ROWS / ng) / (n_all + PRIOR_ROWS) for x in pooled_w]
        w = tuple(tuple((x + PRIOR_ROWS * d) / (sum(ws) + PRIOR_ROWS) for x, d in zip(ws, pooled_w))
                  for ws in weights)
        d_mu, d_k = _fit_beta(dead, DEFAULT.dead_mean, DEFAULT.dead_conc)
        rho = (rho_num + PRIOR_ROWS * DEFAULT.rho) / (rho_den + PRIOR_ROWS)
        pooled = (sum(h_events) + PRIOR_ROWS * DEFAULT.hazards[0]) / (sum(h_trials) + PRIOR_ROWS)
        hz = tuple(min(max((e + PRIOR_ROWS * pooled) / (t + PRIOR_ROWS), 1e-3), 0.999)
                   for e, t in zip(h_events, h_trials))
        p = Params(w, d_mu, d_k, min(max(rho, 1e-3), 0.999), hz, p.offset)
    return p
