"""The sequential strategy: sample where the first error is still uncertain under the change-point posterior, and
stop when it is decided or the budget runs out (docs/labels.md). Registered with the strategy registry
(:mod:`pipeline.labeling.strategies`) as ``--strategy sequential``."""

from __future__ import annotations

from pipeline.labeling.last_step import last_step_label
from pipeline.labeling.strategies import (
    Probe,
    Strategy,
    StrategyGen,
    StrategyParams,
    _add,
    _finish,
    register_strategy,
)
from pipeline.solution import StepStats
from pipeline.stats.intervals import FIRST_WAVE


def sequential(n_steps: int, solution_correct: bool | None, p: StrategyParams) -> StrategyGen:
    """Sample where the first error is still uncertain; stop when it is decided, or the budget runs out.

    The first error is read as a change point (:func:`pipeline.labeling.rules.changepoint_posterior`): every
    prefix is compared with its neighbours (alive before the error, dead from it on), never with zero alone, so
    a 0-of-K step followed by live steps is not an error. Each round samples one wave of ``wave_size`` from the
    interior step whose label (alive/dead) is most uncertain under the posterior — the bisection point at the
    start — and at most ``k`` continuations per step. It stops when the most probable first error has posterior
    ``>= target_confidence`` (``label_status`` "decided"), when the solution's generated tokens reach
    ``max_tokens_per_solution`` ("budget"; the last wave may overshoot it), or when every uncertain step has its
    ``k`` ("exhausted"). A tie between equally probable first errors is recorded (",tie" appended, e.g.
    "budget,tie") and the earlier one is reported. Labels: steps before the first error positive, it negative, steps after it null.
    """
    from pipeline.labeling.rules import RuleParams, StepCount, changepoint_posterior

    stats = [StepStats() for _ in range(n_steps)]
    last = n_steps - 1
    if solution_correct and p.trust_correct:
        return _finish([True] * n_steps, stats)
    rp = RuleParams(eps=p.eps)
    tokens = 0
    while True:
        # each continuation once, at the deepest prefix it reached: independent draws (no reuse double count)
        counts = [StepCount(st.deep_correct, st.deep_n, st.deep_correct / st.deep_n if st.deep_n else None, None)
                  for st in stats]
        post = changepoint_posterior(counts, solution_correct, rp)
        best = max(post)
        if best >= p.target_confidence:
            status = "decided"
            break
        if p.max_tokens_per_solution is not None and tokens >= p.max_tokens_per_solution:
            status = "budget"
            break
        pick, pick_u, cum = None, 0.0, 0.0
        for j in range(last):
            cum += post[j + 1]  # P(first error <= j) = P(prefix j dead)
            u = min(cum, 1.0 - cum)
            if stats[j].own_total < p.k and u > pick_u + 1e-12:
                pick, pick_u = j, u
        if pick is None:
            status = "exhausted"
            break
        results = yield [Probe(pick, min(p.wave_size, p.k - stats[pick].own_total))]
        _add(stats, results)
        tokens += sum(r.tokens for r in results)
    ties = sum(1 for x in post if abs(x - best) <= 1e-9 * best)
    fe = post.index(best) - 1
    if ties > 1:  # equally probable first errors: the earlier is reported, and the tie recorded
        status += ",tie"
    labels: list[bool | None] = [None] * n_steps
    if fe == -1:
        labels = [True] * n_steps
        labels[last] = last_step_label(solution_correct)
    else:
        labels[:fe] = [True] * fe
        labels[fe] = False
    oc = _finish(labels, stats, FIRST_WAVE)
    oc.extra = {"label_status": status, "posterior": best}
    return oc


register_strategy(Strategy("sequential", sequential, reads=frozenset({"wave_size", "target_confidence",
                                                                     "max_tokens_per_solution"})))
