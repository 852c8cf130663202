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
* ``relative`` — the difference with the adjacent step: ``d_i = v_i - v_{i-1}``; positive iff ``d_i > -delta``
  (default 0.5) and the step is not dead with a live predecessor (``v_i == 0 < v_{i-1}``); soft score
  ``(1 + d_i) / 2``. Not GenPRM's rule (that is ``ratio``).
* ``ratio`` — GenPRM's relative progress: positive iff ``v_i / v_{i-1} >= ratio`` (default 0.8); a step after a dead
  one is positive iff it is alive; soft score ``min(1, v_i / v_{i-1})``.
* ``advantage`` — "Rewarding Progress" (PAV): effective reward ``r_i = v_i + alpha * (v_i - v_{i-1})``
  (``alpha`` default 1); positive iff ``r_i > 0``; soft score ``clip(r_i, 0, 1)``.
* ``er-prm`` — ER-PRM's entropy-regularised soft label ``(1/eta) * ln(1 - v_i + v_i * e^eta)`` (``eta`` default
  10; eta -> 0 gives ``soft``, eta -> inf gives ``hard``); positive iff it is >= 0.5.
* ``changepoint`` — the first error as a change point: the posterior over "the first error is step e" (e = -1:
  none), with steps before e alive (success probability ~ Beta(a, b), default Jeffreys 0.5, 0.5, integrated out)
  and steps from e on dead (a dead prefix still reaches the gold answer by luck at rate ``eps``, default 0.02),
  the last step known from the solution's own answer, uniform prior over e. The rule labels the MAP e; steps
  before it positive, it negative, steps after it null (ProcessBench convention). Uses every step's counts, so
  a 0-of-K step followed by live steps is not an error (a rule reading each step alone places errors too early).

The comparison rules (``relative``, ``ratio``, ``advantage``) compare with the **adjacent** step. Where a design
leaves it unestimated (binary-search samples only its probes), a step keeps the strategy's own label: the rule
cannot compare there, and does not pretend to.

Uncertainty is read from the stored columns (schema 4): ``mc_low``/``mc_high`` are the exact 95% interval of a
step's success probability for the sampling design that produced its draws (pipeline.stats.intervals); a step is
*uncertain* when its interval straddles ``t`` (``low < t <= high``; default :data:`DEFAULT_THRESHOLD`).
``first_error_confidence`` is the posterior probability of the stored first error under the first-error model
fitted to the version (pipeline.stats.changepoint, pipeline.storage.confidence); :func:`confidence_of` reads it
for any first error a rule picks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pipeline.stats.changepoint import DEAD_PREFIX_RATE

DEFAULT_THRESHOLD = 0.05  # success probability separating "alive" from "dead" for the uncertainty measures


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
    ratio: float = 0.8  # ratio rule (GenPRM: MC(s_t) / MC(s_{t-1}) >= 0.8)
    alpha: float = 1.0  # advantage rule
    eta: float = 10.0  # er-prm rule
    eps: float = DEAD_PREFIX_RATE  # changepoint: success rate of a dead prefix
    prior_a: float = 0.5  # changepoint: Beta prior of an alive prefix's success rate
    prior_b: float = 0.5


@dataclass
class RuleResult:
    labels: list[bool | None]
    scores: list[float | None]  # soft target in [0, 1] per step (None where the step has no label)
    first_error: int
    extra: dict = field(default_factory=dict)
    # the rule's own probability that ``first_error`` is the true first error (changepoint: its posterior);
    # None: the rule makes no such statement, and callers read the row's stored posterior (confidence_of)
    confidence: float | None = None


# ------------------------------------------------------------------ intervals and posteriors
def straddles(interval: tuple[float, float] | None, t: float = DEFAULT_THRESHOLD) -> bool:
    return interval is not None and interval[0] < t <= interval[1]


def confidence_of(row: dict, first_error: int) -> float | None:
    """The posterior probability that ``first_error`` is the row's true first error, from its stored
    ``first_error_posterior`` (schema 4; pipeline.stats.changepoint); a row without rollouts has the stored
    confidence of its trusted right answer (1 - rho) for "no error" and nothing else; None for a corpus
    written before schema 4."""
    post = row.get("first_error_posterior")
    if post is None:  # no rollouts: only a trusted right answer (no error) has a statement, stored as is
        return row.get("first_error_confidence") if first_error == -1 else None
    if not -1 <= first_error < len(post) - 1:
        return None
    return float(post[first_error + 1])


# ------------------------------------------------------------------ rules
def _first_false(labels: Sequence[bool | None]) -> int:
    return next((i for i, x in enumerate(labels) if x is False), -1)


def _pointwise(
    steps: Sequence[StepCount],
    f: Callable[[float, float], tuple[bool, float]],
    first: Callable[[StepCount], tuple[bool, float]] | None = None,
) -> RuleResult:
    """Apply ``f(v_i, v_{i-1}) -> (label, score)`` to every estimated step, ``v_{i-1}`` the *adjacent* step's
    value. A step without an estimate keeps its stored label; so does an estimated step whose adjacent
    predecessor has none (binary-search leaves the steps between probes unestimated: a comparison rule cannot
    compare there, and says so by keeping the strategy's label). Step 0 gets ``first(step)`` when given
    (the bare problem is never sampled), else ``f(v, v)``. Scores are clipped to [0, 1]."""
    labels: list[bool | None] = []
    scores: list[float | None] = []
    prev: float | None = None
    for i, s in enumerate(steps):
        if s.value is None or (i > 0 and prev is None and first is not None):
            labels.append(s.label)
            scores.append(None if s.label is None else float(s.label))
        else:
            if i == 0:
                lab, score = first(s) if first is not None else f(s.value, s.value)
            else:
                lab, score = f(s.value, s.value if prev is None else prev)
            labels.append(lab)
            scores.append(min(1.0, max(0.0, score)))
        prev = s.value
    return RuleResult(labels, scores, _first_false(labels))


def _alive(s: StepCount) -> bool:
    """Math-Shepherd's hard label from the counts: at least one graded continuation succeeded."""
    return s.correct > 0 if s.graded > 0 else bool(s.value)


def _first_hard(s: StepCount) -> tuple[bool, float]:
    return _alive(s), 1.0 if _alive(s) else 0.0


def hard(steps, solution_correct=None, params: RuleParams | None = None) -> RuleResult:
    """Positive iff at least one graded continuation succeeded (from the counts, own and reused draws)."""
    labels: list[bool | None] = []
    for s in steps:
        labels.append(s.label if s.graded <= 0 and s.value is None else _alive(s))
    return RuleResult(labels, [None if x is None else float(x) for x in labels], _first_false(labels))


def threshold(steps, solution_correct=None, params: RuleParams | None = None) -> RuleResult:
    t = (params or RuleParams()).threshold
    return _pointwise(steps, lambda v, _p: (v >= t, 1.0 if v >= t else 0.0))


def soft(steps, solution_correct=None, params: RuleParams | None = None) -> RuleResult:
    return _pointwise(steps, lambda v, _p: (v >= 0.5, v))


def relative(steps, solution_correct=None, params: RuleParams | None = None) -> RuleResult:
    """Difference with the adjacent step: ``d_i = v_i - v_{i-1} > -delta`` (and not dead after a live step)."""
    delta = (params or RuleParams()).delta

    def f(v, prev):
        d = v - prev
        return d > -delta and not (v == 0 and prev > 0), (1 + d) / 2

    return _pointwise(steps, f, first=lambda s: (_alive(s), 0.5))


def ratio(steps, solution_correct=None, params: RuleParams | None = None) -> RuleResult:
    """GenPRM's relative progress: ``v_i / v_{i-1} >= ratio`` (default 0.8) against the adjacent step; a step
    after a dead one (``v_{i-1} == 0``) is positive iff it is alive; step 0 keeps the hard rule."""
    r = (params or RuleParams()).ratio

    def f(v, prev):
        q = v / prev if prev > 0 else (1.0 if v > 0 else 0.0)
        return q >= r, min(1.0, q)

    return _pointwise(steps, f, first=_first_hard)


def advantage(steps, solution_correct=None, params: RuleParams | None = None) -> RuleResult:
    alpha = (params or RuleParams()).alpha

    def f(v, prev):
        rr = v + alpha * (v - prev)
        return rr > 0, rr

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
    return RuleResult(labels, scores, fe, {"ties": ties}, confidence=best)


@dataclass(frozen=True)
class Rule:
    """A label rule of the registry: ``rule(steps, solution_correct, params)`` and what it reads. ``own_draws``:
    it reads only each step's own draws, independent across steps (:func:`row_steps` with ``own=True``)."""

    fn: Callable[..., RuleResult]
    own_draws: bool = False

    def __call__(self, steps, solution_correct=None, params: RuleParams | None = None) -> RuleResult:
        return self.fn(steps, solution_correct, params)


RULES: dict[str, Rule] = {
    "hard": Rule(hard),
    "threshold": Rule(threshold),
    "soft": Rule(soft),
    "relative": Rule(relative),
    "ratio": Rule(ratio),
    "advantage": Rule(advantage),
    "er-prm": Rule(er_prm),
    "changepoint": Rule(changepoint, own_draws=True),
}


def get_rule(name: str) -> Rule:
    try:
        return RULES[name]
    except KeyError:
        raise ValueError(f"unknown label rule {name!r}; choose one of {', '.join(RULES)}") from None


def row_steps(row: dict, own: bool = False) -> list[StepCount]:
    """The per-step counts of one corpus row (a dict with the ``mc_*`` and ``labels`` columns). ``own``: only
    the step's own draws (``mc_total - mc_reused``), which are independent across steps (a reused draw is the
    same continuation as a draw of an earlier step)."""
    n = len(row["labels"])
    corr = row.get("mc_correct") or [0] * n
    tot = row.get("mc_total") or [0] * n
    ung = row.get("mc_ungradable") or [0] * n
    vals = row.get("mc_value") or [None] * n
    reu = (row.get("mc_reused") or [0] * n) if own else [0] * n
    reu_c = (row.get("mc_reused_correct") or [0] * n) if own else [0] * n
    return [StepCount(int(corr[i] or 0) - int(reu_c[i] or 0), int((tot[i] or 0) - (ung[i] or 0) - (reu[i] or 0)),
                      None if vals[i] is None else float(vals[i]), row["labels"][i]) for i in range(n)]


def apply_rule(row: dict, name: str, params: RuleParams | None = None) -> RuleResult:
    """Labels of one corpus row under rule ``name`` (``hard`` reproduces per-step's labels from the counts;
    a rule with ``own_draws`` (changepoint) reads the steps' own, independent draws)."""
    rule = get_rule(name)
    return rule(row_steps(row, own=rule.own_draws), row.get("solution_correct"), params)


def schema_version(url: str, version: int | None = None) -> int:
    """The schema version a corpus version was written with (its manifest's ``schema_version``)."""
    from pipeline.corpus import open_manifest

    _store, m = open_manifest(url, version)
    return int(m.get("schema_version") or 1)


def corpus_uncertainty(url: str, version: int | None = None, t: float = DEFAULT_THRESHOLD) -> dict:
    """How many labels of a corpus are uncertain (``mcprm stats`` / ``report``), from the stored columns:
    labeled steps whose stored 95% interval straddles ``t``, of the labeled steps with an interval, and the mean
    stored ``first_error_confidence`` of the rows that have one (and how many are below 0.5). A corpus written
    before schema 3 has neither: the figures are None."""
    import pyarrow.compute as pc

    from pipeline.corpus import iter_corpus

    unc = sampled = rows = low = 0
    conf_sum = 0.0
    if schema_version(url, version) < 3:
        return {"threshold": t, "uncertain_steps": None, "sampled_labeled_steps": None, "uncertain_rate": None,
                "mean_first_error_confidence": None, "low_confidence_rows": None}
    batches = iter_corpus(url, version, ["labels", "mc_low", "mc_high", "first_error_confidence"])
    for b in batches:
        for lab, lo, hi in zip(*(b.column(c).to_pylist() for c in ("labels", "mc_low", "mc_high"))):
            for x, a, z in zip(lab or [], lo or [], hi or []):
                if x is not None and a is not None:
                    sampled += 1
                    unc += straddles((a, z), t)
        conf = b.column("first_error_confidence")
        valid = conf.drop_null()
        rows += len(valid)
        conf_sum += float(pc.sum(valid).as_py() or 0.0)
        low += int(pc.sum(pc.less(valid, 0.5)).as_py() or 0)
    return {"threshold": t, "uncertain_steps": unc, "sampled_labeled_steps": sampled,
            "uncertain_rate": unc / sampled if sampled else None,
            "mean_first_error_confidence": conf_sum / rows if rows else None, "low_confidence_rows": low}
