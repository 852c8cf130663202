"""Reach gating, the scheduler's part: the bare-problem draws (:data:`pipeline.labeling.strategies.BARE`) made once
per problem and shared by its solutions (:func:`draw_bare`, :func:`answer_bare`); the strategy is
:func:`pipeline.labeling.strategies.reach_gated`. docs/labels.md, "Reach gating", says when to use it."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence

from pipeline.labeling.last_step import (
    CORRECT,
    EXCLUDED,
    FAILURE,
    is_no_answer,
    is_unreadable,
    outcome,
)
from pipeline.labeling.strategies import (
    BARE,
    Probe,
    ProbeResult,
)
from pipeline.solution import Solution
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
