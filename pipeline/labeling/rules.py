"""Label rules and label uncertainty, computed from the stored Monte Carlo counts (no new rollouts).

Every rule is one pure function ``rule(steps, solution_correct, params) -> RuleResult`` over the per-step counts
of one row (:class:`StepCount`: ``correct`` and ``graded = mc_total - mc_ungradable``, ``value`` = ``mc_value``,
``label`` = the stored hard label). A step a strategy never estimated (``value`` None, e.g. every step of a
``--trust-correct`` row, or the steps after ``binary-search``'s first error) keeps its stored label under every
rule; the last step is valued by the solution's own answer (its stored ``mc_value`` 1.0/0.0). ``first_error`` is
the first step whose rule label is False, or -1.

Rules (``v_i`` = ``mc_value`` of step i; ``v_{-1}`` := ``v_0`` for the comparison rules, since the bare problem is
never sampled, so step 0 keeps its hard label there):

* ``hard`` — Math-Shepherd: positive iff at least one graded continuation succeeded (``v_i > 0``).
* ``threshold`` — positive iff ``v_i >= t`` (``t`` = ``params.threshold``, default 0.5).
* ``soft`` — the soft label ``v_i`` itself; as a hard label, ``v_i >= 0.5``.
* ``relative`` — relative progress (GenPRM): ``d_i = v_i - v_{i-1}``; positive iff ``d_i > -delta`` (a step is an
  error when it loses more than ``delta`` (default 0.5) of success probability against the previous prefix) and
  the step is not dead with a live predecessor (``v_i == 0 < v_{i-1}``); soft score ``(1 + d_i) / 2``.
* ``advantage`` — "Rewarding Progress" (PAV): effective reward ``r_i = v_i + alpha * (v_i - v_{i-1})``
  (``alpha`` default 1); positive iff ``r_i > 0``; soft score ``clip(r_i, 0, 1)``.
* ``er-prm`` — ER-PRM's entropy-regularised soft label ``(1/eta) * ln(1 - v_i + v_i * e^eta)`` (``eta`` default
  10; eta -> 0 gives ``soft``, eta -> inf gives ``hard``); positive iff it is >= 0.5.
* ``changepoint`` — the first error as a change point: the posterior over "the first error is step e" (e = -1:
  none), with steps before e alive (success probability ~ Beta(a, b), default Jeffreys 0.5, 0.5, integrated out)
  and steps from e on dead (a dead prefix still reaches the gold answer by luck at rate ``eps``, default 0.02),
  the last step known from the solution's own answer, uniform prior over e. The rule labels the MAP e; steps
  before it positive, it negative, steps after it null (ProcessBench convention). Uses every step's counts, so
  a 0-of-K step followed by live steps is not an error (issue 16: errors placed too early).

Uncertainty: :func:`wilson` is the 95% Wilson score interval of a step's success probability (``mc_low``,
``mc_high`` in the corpus); a step is *uncertain* when its interval straddles the threshold ``t``
(``low < t <= high``; default :data:`DEFAULT_THRESHOLD`). :func:`first_error_confidence` is the probability,
under independent Jeffreys Beta posteriors ``Beta(correct + 1/2, graded - correct + 1/2)`` per estimated step,
that the first-error step's success probability is below ``t`` and every estimated step before it is at or above
``t`` (for ``first_error == -1``: every estimated step at or above ``t``). Steps with no rollouts (labeled by the
own answer or by ``--trust-correct``) count as certain.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

DEFAULT_THRESHOLD = 0.05  # success probability separating "alive" from "dead" for the uncertainty measures
Z95 = 1.959963984540054


@dataclass(frozen=True)
class StepCount:
    correct: int = 0
    graded: int = 0  # mc_total - mc_ungradable
    value: float | None = None  # mc_value (None: not estimated)
    label: bool | None = None  # the stored hard label


@dataclass
class RuleParams:
    threshold: float = 0.5  # threshold rule
    delta: float = 0.5  # relative rule
    alpha: float = 1.0  # advantage rule
    eta: float = 10.0  # er-prm rule
    eps: float = 0.02  # changepoint: success rate of a dead prefix
    prior_a: float = 0.5  # changepoint: Beta prior of an alive prefix's success rate
    prior_b: float = 0.5


@dataclass
class RuleResult:
    labels: list[bool | None]
    scores: list[float | None]  # soft target in [0, 1] per step (None where the step has no label)
    first_error: int
    extra: dict = field(default_factory=dict)


# ------------------------------------------------------------------ intervals and posteriors
def wilson(correct: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """95% Wilson score interval of a success probability from ``correct`` of ``n`` (None when n == 0)."""
    if n <= 0:
        return None
    phat = correct / n
    denom = 1 + z * z / n
    centre = (phat + z * z / (2 * n)) / denom
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def straddles(interval: tuple[float, float] | None, t: float = DEFAULT_THRESHOLD) -> bool:
    return interval is not None and interval[0] < t <= interval[1]


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


def p_below(correct: int, n: int, t: float = DEFAULT_THRESHOLD) -> float:
    """P(success probability < t) under the Jeffreys posterior Beta(correct + 1/2, n - correct + 1/2)."""
    return beta_cdf(t, correct + 0.5, n - correct + 0.5)


def first_error_confidence(steps: Sequence[StepCount], first_error: int, t: float = DEFAULT_THRESHOLD) -> float:
    """P(the first-error step is below ``t`` and every estimated step before it at or above), see module doc."""
    end = len(steps) if first_error == -1 else first_error
    conf = 1.0
    for s in steps[:end]:
        if s.graded > 0:
            conf *= 1.0 - p_below(s.correct, s.graded, t)
    if first_error != -1 and first_error < len(steps):
        s = steps[first_error]
        if s.graded > 0:
            conf *= p_below(s.correct, s.graded, t)
    return conf


# ------------------------------------------------------------------ rules
def _first_false(labels: Sequence[bool | None]) -> int:
    return next((i for i, x in enumerate(labels) if x is False), -1)


def _pointwise(
    steps: Sequence[StepCount],
    f: Callable[[float, float], tuple[bool, float]],
    first: Callable[[float], tuple[bool, float]] | None = None,
) -> RuleResult:
    """Apply ``f(v_i, v_prev) -> (label, score)`` to every estimated step; unestimated steps keep their label.
    The first estimated step gets ``first(v)`` when given, else ``f(v, v)``; scores are clipped to [0, 1]."""
    labels: list[bool | None] = []
    scores: list[float | None] = []
    prev: float | None = None
    for s in steps:
        if s.value is None:
            labels.append(s.label)
            scores.append(None if s.label is None else float(s.label))
            continue
        if prev is None:
            lab, score = first(s.value) if first is not None else f(s.value, s.value)
        else:
            lab, score = f(s.value, prev)
        labels.append(lab)
        scores.append(min(1.0, max(0.0, score)))
        prev = s.value
    return RuleResult(labels, scores, _first_false(labels))


def hard(steps, solution_correct=None, params: RuleParams | None = None) -> RuleResult:
    return _pointwise(steps, lambda v, _p: (v > 0, 1.0 if v > 0 else 0.0))


def threshold(steps, solution_correct=None, params: RuleParams | None = None) -> RuleResult:
    t = (params or RuleParams()).threshold
    return _pointwise(steps, lambda v, _p: (v >= t, 1.0 if v >= t else 0.0))


def soft(steps, solution_correct=None, params: RuleParams | None = None) -> RuleResult:
    return _pointwise(steps, lambda v, _p: (v >= 0.5, v))


def relative(steps, solution_correct=None, params: RuleParams | None = None) -> RuleResult:
    delta = (params or RuleParams()).delta

    def f(v, prev):
        d = v - prev
        return d > -delta and not (v == 0 and prev > 0), (1 + d) / 2

    return _pointwise(steps, f, first=lambda v: (v > 0, 0.5))


def advantage(steps, solution_correct=None, params: RuleParams | None = None) -> RuleResult:
    alpha = (params or RuleParams()).alpha

    def f(v, prev):
        r = v + alpha * (v - prev)
        return r > 0, r

    return _pointwise(steps, f)


def er_prm(steps, solution_correct=None, params: RuleParams | None = None) -> RuleResult:
    eta = (params or RuleParams()).eta

    def f(v, _p):
        s = math.log1p(v * math.expm1(eta)) / eta
        return s >= 0.5, s

    return _pointwise(steps, f)


def _log_betabinom(k: int, n: int, a: float, b: float) -> float:
    # log P(k of n | p ~ Beta(a, b)) without the binomial coefficient (it cancels between alive and dead)
    return (math.lgamma(k + a) + math.lgamma(n - k + b) - math.lgamma(n + a + b)
            + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b))


def changepoint_posterior(steps: Sequence[StepCount], solution_correct: bool | None,
                          params: RuleParams | None = None) -> list[float]:
    """Posterior over the first error e, as a list indexed e + 1 (index 0: no error). See module doc."""
    p = params or RuleParams()
    m = len(steps)
    last = m - 1
    alive_ll: list[float] = []
    dead_ll: list[float] = []
    leps, l1eps = math.log(p.eps), math.log1p(-p.eps)
    for i, s in enumerate(steps):
        if i == last and m > 0 and s.graded == 0:
            # the own answer: right = the full solution reached the gold answer (a dead one only by luck, eps)
            if solution_correct is True:
                alive_ll.append(0.0)
                dead_ll.append(leps)
            elif solution_correct is False:
                alive_ll.append(-math.inf)
                dead_ll.append(0.0)
            else:
                alive_ll.append(0.0)
                dead_ll.append(0.0)
            continue
        if s.graded <= 0:
            if s.value is None and s.label is True:  # trust-correct / probed-positive without counts: alive
                alive_ll.append(0.0)
                dead_ll.append(leps)
            else:
                alive_ll.append(0.0)
                dead_ll.append(0.0)
            continue
        k, n = s.correct, s.graded
        alive_ll.append(_log_betabinom(k, n, p.prior_a, p.prior_b))
        dead_ll.append(k * leps + (n - k) * l1eps)
    # log L(e) = sum_{j<e} alive_j + sum_{j>=e} dead_j; e = m means no error
    suffix_dead = [0.0] * (m + 1)
    for j in range(m - 1, -1, -1):
        suffix_dead[j] = suffix_dead[j + 1] + dead_ll[j]
    logl = []
    pre = 0.0
    for e in range(m + 1):
        logl.append(pre + suffix_dead[e])
        if e < m:
            pre += alive_ll[e]
    top = max(logl)
    if top == -math.inf:
        return [1.0 / (m + 1)] * (m + 1)
    w = [math.exp(x - top) for x in logl]
    z = sum(w)
    post = [x / z for x in w]
    # reorder: index 0 = no error (e = m in the loop), index e + 1 = first error at e
    return [post[m]] + post[:m]


def changepoint(steps, solution_correct=None, params: RuleParams | None = None) -> RuleResult:
    m = len(steps)
    if m == 0:
        return RuleResult([], [], -1)
    post = changepoint_posterior(steps, solution_correct, params)
    best = max(post)
    idx = post.index(best)
    fe = idx - 1
    ties = sum(1 for x in post if abs(x - best) <= 1e-9 * max(best, 1e-300))
    labels: list[bool | None] = [True] * m if fe == -1 else [True] * fe + [False] + [None] * (m - fe - 1)
    # soft score: the posterior probability that step i is still alive, P(e > i or no error)
    alive_after = []
    acc = post[0]
    for i in range(m - 1, -1, -1):
        acc_i = acc  # P(e > i) = no error + e in (i, m)
        alive_after.append(acc_i)
        acc += post[i + 1]
    scores: list[float | None] = list(reversed(alive_after))
    scores = [s if lab is not None else None for s, lab in zip(scores, labels)]
    return RuleResult(labels, scores, fe, {"confidence": best, "ties": ties})


RULES: dict[str, Callable[..., RuleResult]] = {
    "hard": hard,
    "threshold": threshold,
    "soft": soft,
    "relative": relative,
    "advantage": advantage,
    "er-prm": er_prm,
    "changepoint": changepoint,
}


def get_rule(name: str) -> Callable[..., RuleResult]:
    try:
        return RULES[name]
    except KeyError:
        raise ValueError(f"unknown label rule {name!r}; choose one of {', '.join(RULES)}") from None


def row_steps(row: dict) -> list[StepCount]:
    """The per-step counts of one corpus row (a dict with the ``mc_*`` and ``labels`` columns)."""
    n = len(row["labels"])
    corr = row.get("mc_correct") or [0] * n
    tot = row.get("mc_total") or [0] * n
    ung = row.get("mc_ungradable") or [0] * n
    vals = row.get("mc_value") or [None] * n
    return [StepCount(int(corr[i] or 0), int((tot[i] or 0) - (ung[i] or 0)),
                      None if vals[i] is None else float(vals[i]), row["labels"][i]) for i in range(n)]


def apply_rule(row: dict, name: str, params: RuleParams | None = None) -> RuleResult:
    """Labels of one corpus row under rule ``name`` (``hard`` reproduces the stored labels)."""
    return get_rule(name)(row_steps(row), row.get("solution_correct"), params)


def intervals(row: dict) -> tuple[list[float | None], list[float | None]]:
    """Per-step Wilson 95% bounds (``mc_low``, ``mc_high``) of one row; None where nothing was graded."""
    lows, highs = [], []
    for s in row_steps(row):
        iv = wilson(s.correct, s.graded)
        lows.append(None if iv is None else iv[0])
        highs.append(None if iv is None else iv[1])
    return lows, highs


def uncertain_steps(row: dict, t: float = DEFAULT_THRESHOLD) -> int:
    """How many labeled steps of a row have an interval that straddles ``t``."""
    return sum(1 for s in row_steps(row) if s.label is not None and straddles(wilson(s.correct, s.graded), t))


def corpus_uncertainty(url: str, version: int | None = None, t: float = DEFAULT_THRESHOLD) -> dict:
    """How many labels of a corpus are uncertain (``mcprm stats`` / ``report``), from the stored counts, so any
    schema version works: labeled steps whose 95% Wilson interval straddles ``t``, of the labeled steps with
    rollouts, and the mean :func:`first_error_confidence` of the rows (and how many are below 0.5)."""
    from pipeline.storage.corpus import iter_corpus

    cols = ["labels", "mc_correct", "mc_total", "mc_ungradable", "first_error"]  # (mc_value: not used here)
    unc = sampled = rows = low = 0
    conf_sum = 0.0
    for b in iter_corpus(url, version, cols):
        got = _batch_uncertainty(b, t)  # issue 17: whole columns, the same numbers as the loop below
        if got is not None:
            u, sm, confs = got
            unc += u
            sampled += sm
            rows += len(confs)
            for c in confs.tolist():  # in row order, as the loop adds them
                conf_sum += c
            low += int((confs < 0.5).sum())
            continue
        for r in b.to_pylist():
            steps = row_steps(r)
            rows += 1
            for s in steps:
                if s.label is not None and s.graded > 0:
                    sampled += 1
                    unc += straddles(wilson(s.correct, s.graded), t)
            c = first_error_confidence(steps, r["first_error"], t)
            conf_sum += c
            low += c < 0.5
    return {"threshold": t, "uncertain_steps": unc, "sampled_labeled_steps": sampled,
            "uncertain_rate": unc / sampled if sampled else None,
            "mean_first_error_confidence": conf_sum / rows if rows else None, "low_confidence_rows": low}


def _batch_uncertainty(b, t: float):
    """(uncertain steps, sampled labeled steps, per-row first-error confidence) of a corpus batch, computed on
    whole columns: the Wilson test and the Jeffreys probabilities once per distinct (correct, graded) pair,
    each row's product in step order (so the same floats as :func:`first_error_confidence`). None when a
    row's count lists are missing or of another length than its labels, or its first_error is below -1
    (the row-by-row code handles those)."""
    import numpy as np
    import pyarrow.compute as pc

    labels = b.column("labels")
    lists = [b.column(c) for c in ("mc_correct", "mc_total", "mc_ungradable")]
    fe = b.column("first_error")
    if labels.null_count or fe.null_count or any(x.null_count for x in lists):
        return None
    n = pc.list_value_length(labels).to_numpy(zero_copy_only=False).astype(np.int64)
    if any(not np.array_equal(n, pc.list_value_length(x).to_numpy(zero_copy_only=False)) for x in lists):
        return None
    fe = fe.to_numpy(zero_copy_only=False).astype(np.int64)
    if (fe < -1).any():
        return None
    correct, total, ung = (pc.list_flatten(x).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
                           for x in lists)
    graded = total - ung
    labeled = pc.list_flatten(labels).is_valid().to_numpy(zero_copy_only=False)
    parent = np.repeat(np.arange(len(n)), n)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64) if len(n) else n
    pos = np.arange(len(parent), dtype=np.int64) - starts[parent]
    est = graded > 0
    c_est, g_est = correct[est], graded[est]
    # each distinct (correct, graded) pair once: a dense table when counts are small (no sort), else np.unique
    lo = int(c_est.min()) if len(c_est) else 0  # codes from 0 whatever the counts
    gmax = int(g_est.max()) + 1 if len(g_est) else 1
    code = (c_est - lo) * gmax + g_est
    if not len(code) or int(code.max()) < 4_000_000:
        slot = np.zeros(int(code.max()) + 1 if len(code) else 1, dtype=np.int64)
        slot[code] = 1
        uniq = np.flatnonzero(slot)
        slot[uniq] = np.arange(len(uniq))
        inv = slot[code]
    else:
        uniq, inv = np.unique(code, return_inverse=True)
        inv = inv.reshape(-1)
    pairs = [(int(u // gmax) + lo, int(u % gmax)) for u in uniq]
    straddle = np.array([straddles(wilson(c, g), t) for c, g in pairs], dtype=bool)
    below = np.array([p_below(c, g, t) for c, g in pairs], dtype=np.float64)
    sampled_mask = labeled[est]
    unc = int(straddle[inv][sampled_mask].sum())
    # each step's factor: (1 - P(below)) before the first error, P(below) at it, 1.0 otherwise or unestimated
    end = np.where(fe == -1, n, fe)[parent]
    factor = np.ones(len(parent), dtype=np.float64)
    pb = below[inv]
    at = pos[est]
    factor[est] = np.where(at < end[est], 1.0 - pb, np.where(at == end[est], pb, 1.0))
    confs = np.ones(len(n), dtype=np.float64)
    nonempty = n > 0
    if nonempty.any():  # a sequential product per row (multiply is not reduced pairwise), 1.0 for no steps
        confs[nonempty] = np.multiply.reduceat(factor, starts[nonempty])
    return unc, int(sampled_mask.sum()), confs
