"""Reach gating (docs/labels.md, "Reach gating", says when to use it): binary-search behind a gate that first asks
whether the completer reaches the answer at all. The strategy's part is :func:`reach_gated` (registered as
binary-search's gated generator); the scheduler's part is the bare-problem draws
(:data:`pipeline.labeling.strategies.BARE`), made once per problem and shared by its solutions
(:func:`draw_bare`, :func:`answer_bare`)."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
from collections.abc import Sequence

from pipeline.labeling.last_step import (
    CORRECT,
    EXCLUDED,
    FAILURE,
    is_no_answer,
    is_unreadable,
    last_step_label,
    outcome,
)
from pipeline.labeling.strategies import (
    BARE,
    STRATEGIES,
    Probe,
    ProbeResult,
    StrategyGen,
    StrategyOutcome,
    StrategyParams,
    _add,
    _alive,
    _bisect,
    _early_design,
    _estimate,
    _finish,
    register_strategy,
)
from pipeline.solution import REACH_SEARCHED, REACH_TRUSTED, UNREACHED, Solution, StepStats
from pipeline.stats.intervals import FIRST_WAVE, next_wave
from rollouts.base import GenRequest


def problem_key(problem: str) -> str:
    """The identity of a problem by its text alone: the seed key of its bare-problem draws, which all its
    solutions share (16 hex chars of sha256)."""
    return hashlib.sha256(problem.encode("utf-8")).hexdigest()[:16]


def draw_bare(sched, solutions: Sequence[Solution], derive_seed) -> None:
    """Draw K continuations of each distinct problem of ``solutions`` alone (the reach gate's first probe) for
    the scheduler ``sched``, in one batch before any strategy starts. The seeds derive from the run seed and the
    problem's text, never from a solution, so every solution of a problem gets the same draws wherever it is
    labeled (any sharding, a resumed run): labels stay deterministic, and solutions labeled together share one
    draw. The cost is charged to the first of them in input order (its row's rollouts and tokens), so a
    corpus's totals count it once per batch the problem appears in."""
    k = sched.params.k
    first: dict[str, int] = {}
    for idx, sol in enumerate(solutions):
        first.setdefault(problem_key(sol.problem), idx)
    if not first:
        return
    sched.stats.rounds += 1
    reqs = [GenRequest(prompt=sched.prompt.prefix(solutions[i].problem, []), n=k,
                       seed=derive_seed(sched.seed, pk, BARE, 0), group=pk) for pk, i in first.items()]
    sched.stats.requests += len(reqs)
    sched.stats.per_round_requests.append(len(reqs))
    completions: list = []
    t0 = time.perf_counter()
    for start in range(0, len(reqs), sched.max_batch_requests):
        chunk = reqs[start : start + sched.max_batch_requests]
        got = sched.backend.generate(chunk, sched.sampling)
        if len(got) != len(chunk) or any(len(c) != r.n for c, r in zip(got, chunk)):
            raise RuntimeError(f"backend {sched.backend.name} returned the wrong number of completions")
        completions.extend(got)
    sched.stats.generate_seconds += time.perf_counter() - t0
    t0 = time.perf_counter()
    owners = list(first.items())
    pairs = [(solutions[i].answer, c.text) for (_pk, i), comps in zip(owners, completions) for c in comps]
    probs = [solutions[i].problem for (_pk, i), comps in zip(owners, completions) for _c in comps]
    verdicts = sched._grade(pairs, probs)
    sched.stats.grade_seconds += time.perf_counter() - t0
    pos = 0
    for (pk, i), comps in zip(owners, completions):
        vs = verdicts[pos : pos + len(comps)]
        pos += len(comps)
        outs = [outcome(v, sched.unreadable) for v in vs]
        tokens = sum(c.num_tokens for c in comps)
        res = ProbeResult(BARE, len(comps), outs.count(CORRECT), outs.count(EXCLUDED), tokens,
                          sum(1 for v in vs if is_no_answer(v)),
                          sum(1 for v, o in zip(vs, outs) if o == FAILURE and is_unreadable(v)))
        sched._bare[pk] = (res, len(comps), tokens, i)
        sched.stats.rollouts += len(comps)
        sched.stats.rollout_tokens += tokens
        sched.stats.ungradable += res.ungradable
        sched.stats.no_answer += res.no_answer
        sched.stats.unreadable += res.unreadable


def answer_bare(sched, idx: int, st, probes: list[Probe]) -> list[ProbeResult]:
    """The results of a round of solution ``idx`` (its scheduler state ``st``) that asks for the bare problem,
    from :func:`draw_bare`'s draws; the solution that pays for them gets their rollouts and tokens."""
    if len(probes) != 1:
        raise RuntimeError(f"strategy {sched.strategy} asked for the bare problem together with other probes: "
                           f"{probes} (it is answered from the per-problem draws, alone)")
    got = sched._bare.get(problem_key(st.sol.problem))
    if got is None:
        raise RuntimeError(f"strategy {sched.strategy} asked for the bare problem, but the scheduler was not "
                           "built with reach_gate (no per-problem draws were made)")
    res, n, tokens, payer = got
    if probes[0].n != res.n:
        raise RuntimeError(f"the bare problem was drawn {res.n} times, the strategy asked for {probes[0].n}")
    if payer == idx:
        st.rollouts += n
        st.tokens += tokens
    return [res]


# ------------------------------------------------------------------------------------------- the strategy's part
def reach_gated(n_steps: int, solution_correct: bool | None, p: StrategyParams) -> StrategyGen:
    """Binary-search behind a reach gate. The bare problem (:data:`BARE`, K draws shared by the problem's
    solutions; ``--reach-probe step1``: step 1's own draws, :func:`_step1_gated`) gives the pass rate: a right
    answer is trusted ("trusted") only from ``trust_pass_rate`` on. Else step 1 is probed and the search goes on;
    when no continuation of the bare problem or of any probed prefix reached the answer the row is "unreached": no
    claim but its first error (``unreached_claim``), and ``mcprm train`` leaves it out. Else the search's labels
    ("searched")."""
    if p.reach_probe == "step1":
        return (yield from _step1_gated(n_steps, solution_correct, p))
    stats = [StepStats() for _ in range(n_steps)]
    bare = (yield [Probe(BARE, p.k)])[0]
    graded = bare.n - bare.ungradable
    rate = bare.correct / graded if graded > 0 else None
    if solution_correct and p.trust_correct and rate is not None and rate >= p.trust_pass_rate:
        return _status(_finish([True] * n_steps, stats), REACH_TRUSTED)
    if n_steps == 1:  # one step: the solution's own answer labels it (the last-step rule), nothing to search
        return _status(_finish([last_step_label(solution_correct)], stats), REACH_SEARCHED)
    alive = yield from _estimate(0, stats, p, p.early_stop)
    return (yield from _search_on(n_steps, solution_correct, p, stats, alive, bare.correct, graded))


def _step1_gated(n_steps: int, solution_correct: bool | None, p: StrategyParams) -> StrategyGen:
    """:func:`reach_gated` with step 1's own draws as the pass rate (``--reach-probe step1``): no bare-problem
    draws. A right answer (with trust on) has step 1 drawn until trust is settled (:func:`_trust_probe`:
    trusted from ``ceil(trust_pass_rate * K)`` successes of K); else step 1 is a first-success probe. Then as
    :func:`reach_gated`, with no bare problem to say the problem is solvable."""
    stats = [StepStats() for _ in range(n_steps)]
    if n_steps == 1:  # one step: the solution's own answer labels it (the last-step rule), nothing to probe
        return _status(_finish([last_step_label(solution_correct)], stats), REACH_SEARCHED)
    if not (solution_correct and p.trust_correct):
        alive = yield from _estimate(0, stats, p, p.early_stop)
        return (yield from _search_on(n_steps, solution_correct, p, stats, alive, 0, 0))
    need = max(1, math.ceil(p.trust_pass_rate * p.k - 1e-9))
    alive = yield from _trust_probe(stats, p, need)
    # step 1 stopped on its successes: only its first wave is unbiased
    if stats[0].own_correct >= need:
        return _status(_finish([True] * n_steps, stats, FIRST_WAVE), REACH_TRUSTED)
    return (yield from _search_on(n_steps, solution_correct, p, stats, alive, 0, 0, FIRST_WAVE))


def _trust_probe(stats: list[StepStats], p: StrategyParams, need: int):
    """Sub-generator: step 1's draws in waves until the trust question is settled: ``need`` successes (trusted),
    more failures than ``K - need`` with a success among them (not trusted, and alive), or K draws. Its first
    wave is a batch fixed before any draw was seen, so the row's design is ``first-wave``."""
    st = stats[0]

    def settled() -> bool:
        return (st.own_total >= p.k or st.own_correct >= need
                or (st.own_correct > 0 and st.own_graded - st.own_correct > p.k - need))

    while not settled():
        n = min(next_wave(st.own_total, p.wave_size, p.wave_growth), p.k - st.own_total)
        _add(stats, (yield [Probe(0, n)]))
    return _alive(st)


def _search_on(n_steps: int, solution_correct: bool | None, p: StrategyParams, stats: list[StepStats],
               alive: bool | None, bare_correct: int, bare_graded: int, design: str | None = None):
    """Sub-generator: the gate's search once step 1 is probed (``alive``), from the bare problem's successes and
    graded draws (0 and 0 where none were drawn); ``design`` overrides the search's own."""
    if alive is not False:  # alive, or all ungradable (no evidence: never invent an error from missing evidence)
        oc = yield from _bisect(n_steps, solution_correct, p, stats, lo=0, probed={0})
        return _status(oc, REACH_SEARCHED, design)
    if bare_correct > 0:  # the problem is solvable and step 1 is not: step 1 is the first error
        oc = yield from _bisect(n_steps, solution_correct, p, stats, lo=-1, hi=0, probed={0})
        return _status(oc, REACH_SEARCHED, design)
    # neither reached: a later prefix may (closer to the answer), so the search goes on as if step 1 were unknown
    oc = yield from _bisect(n_steps, solution_correct, p, stats, probed={0})
    if any(st.correct > 0 for st in stats) or bare_graded + stats[0].graded == 0:
        return _status(oc, REACH_SEARCHED, design)
    labels: list[bool | None] = [None] * n_steps
    if solution_correct is False or p.unreached_claim == "step1":
        labels[0] = False
    return _status(_finish(labels, stats, design or _early_design(p, p.early_stop)), UNREACHED)


def _status(oc: StrategyOutcome, status: str, design: str | None = None) -> StrategyOutcome:
    oc = dataclasses.replace(oc, extra={**oc.extra, "label_status": status})
    return oc if design is None else dataclasses.replace(oc, design=design)


register_strategy(dataclasses.replace(STRATEGIES["binary-search"], gated=reach_gated))
