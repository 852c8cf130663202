"""Labeling strategies: policies for *which* step prefix to estimate next, with how many continuations.

A strategy never talks to a model. It is a generator per solution that yields a list of :class:`Probe`
("n continuations from the prefix that ends with step i") and receives the graded :class:`ProbeResult` of
each probe, in the same order. When it has seen enough it returns a :class:`StrategyOutcome`. The scheduler
(:mod:`pipeline.labeling.scheduler`) drives thousands of these generators at once, so every strategy gets the same
batching, prefix locality and rollout accounting.

Conventions shared by all strategies (see docs/labels.md, "Strategies"):

* The last step is labeled by the solution's own final answer (graded once, no rollouts;
  :mod:`pipeline.labeling.last_step`).
* A prefix is *alive* when at least one of its graded continuations reached the gold answer; the hard label of
  a step is whether its prefix is alive. Continuations the grader could not decide (null) are counted in
  ``ungradable`` and never as wrong; a step whose continuations were all ungradable gets a null label. A
  continuation with no final answer did not reach the gold answer: it is graded incorrect (Math-Shepherd),
  and also counted in ``no_answer``.
* ``first_error`` is the first step whose hard label is False, or -1.
* ``binary-search`` and ``adaptive`` leave steps after the first error unlabeled (null), as ProcessBench and
  PRM800K do. With ``trust_correct`` (their default), a solution whose final answer is right is labeled
  positive throughout without rollouts: each of its prefixes has at least one successful continuation (the
  solution itself), which is the definition of alive.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from pipeline.labeling.last_step import last_step_label
from pipeline.solution import StepStats
from pipeline.stats.changepoint import DEAD_PREFIX_RATE
from pipeline.stats.intervals import FIRST_SUCCESS, FIRST_WAVE, FIXED, next_wave, wilson

# The strategies' parameters' defaults, declared once, here: the options of ``mcprm label`` (pipeline.options)
# and :class:`StrategyParams` both read them. Why these values: docs/labels.md and BENCHMARKS.md.
DEFAULT_K = 20  # continuations per step prefix (--k)
DEFAULT_WAVE_SIZE = 2  # continuations per wave (binary-search, adaptive, sequential)
# each wave of a probe is this many times the one before (binary-search, adaptive): 2, 4, 8, 6 for K=20, so a
# dead prefix takes 4 rounds, not 10 (the critical path on GPUs)
DEFAULT_WAVE_GROWTH = 2.0
DEFAULT_BISECT_FRACTION = 0.6  # binary-search's probe point between the last live and first dead prefix
DEFAULT_RELATIVE_DROP = 0.25  # binary-search: a prefix under this share of the last live one's rate is dead
# --reach-gate: a right final answer is trusted only when the completer solved the bare problem at least this
# often (docs/labels.md, "Reach gating")
DEFAULT_TRUST_PASS_RATE = 0.5
# --reach-gate: an unreached row's first-error claim. answer: step 1 on a wrong answer (an error exists), none on a
# right one (its answer is the only evidence); step1: step 1 on both, per-step's reading
UNREACHED_CLAIMS = ("answer", "step1")
DEFAULT_UNREACHED_CLAIM = "answer"
# --reach-gate: what gives the pass rate. bare: K draws of the problem alone, shared by its solutions; step1: step
# 1's own draws, in waves until the trust question is settled (no bare draws: on a set with one solution per problem
# they are shared by no one, and they and step 1's are a solution's longest continuations; docs/labels.md)
REACH_PROBES = ("bare", "step1")
DEFAULT_REACH_PROBE = "bare"
DEFAULT_TARGET_CONFIDENCE = 0.9  # sequential: the first error's posterior at which it stops

# Probe.step of the bare problem (no step): drawn once per problem, seeds from its text alone, so every solution of
# a problem is answered with the same draws (pipeline.labeling.reach)
BARE = -1


@dataclass(frozen=True)
class Probe:
    step: int  # prefix = steps[0..step]
    n: int  # independent continuations wanted
    # a first-success probe's next waves, should this one have no success (the rest of its schedule up to K):
    # the scheduler may draw them in the same round when the engine has room (Scheduler.tail_fill); it then
    # keeps the waves up to the first with a success and discards the rest, so the steps' draws are exactly
    # those of the schedule (the same labels, estimates and intervals) in fewer rounds
    later: tuple[int, ...] = ()


@dataclass(frozen=True)
class Reuse:
    """Continuations of an earlier prefix that are draws of prefix ``step`` (see ProbeResult.reused)."""

    step: int
    n: int
    correct: int
    ungradable: int = 0
    no_answer: int = 0
    unreadable: int = 0


@dataclass(frozen=True)
class ProbeResult:
    step: int
    n: int
    correct: int
    ungradable: int
    tokens: int
    no_answer: int = 0  # no final answer found: a failure (included in n, not in correct)
    unreadable: int = 0  # an answer the grader could not read: a failure by default (last_step.outcome)
    # continuations of this probe that wrote the next steps of the solution verbatim, credited to those later
    # prefixes (rollout reuse; counted there as ``reused``, never as new rollouts or tokens)
    reused: tuple[Reuse, ...] = ()
    # (step, graded, correct): this probe's graded continuations, each once, at the deepest prefix it reached
    # (its own step unless reuse carried it further); empty = all at ``step``
    deep: tuple[tuple[int, int, int], ...] = ()


@dataclass
class StrategyOutcome:
    labels: list[bool | None]
    stats: list[StepStats]
    first_error: int
    extra: dict = field(default_factory=dict)  # e.g. {"label_status": "budget"} (sequential)
    design: str = FIXED  # how the steps' own draws were sampled (pipeline.stats.intervals.DESIGNS)


StrategyGen = Generator[list[Probe], list[ProbeResult], StrategyOutcome]


@dataclass(frozen=True)
class StrategyParams:
    k: int = DEFAULT_K
    wave_size: int = DEFAULT_WAVE_SIZE
    wave_growth: float = DEFAULT_WAVE_GROWTH  # binary-search / adaptive: each wave this many times the last
    confidence_width: float | None = None
    trust_correct: bool = False
    early_stop: bool = True  # binary-search: stop a probe at its first success
    target_confidence: float = DEFAULT_TARGET_CONFIDENCE  # sequential: stop when the first error's posterior reaches this
    max_tokens_per_solution: int | None = None  # sequential: stop sampling a solution past this many tokens
    eps: float = DEAD_PREFIX_RATE  # sequential: success rate of a dead prefix (pipeline.labeling.rules.changepoint)
    # binary-search: where in the open interval (lo, hi) the next probe goes; 0.5 = classic bisection, larger =
    # later prefixes first (LabelConfig.bisect_fraction; measured in BENCHMARKS.md, "Strategies x label rules")
    bisect_fraction: float = DEFAULT_BISECT_FRACTION
    # binary-search: each probe's first round also draws the first wave of both prefixes the search may probe
    # next, so the next probe starts one round ahead (fewer rounds on a GPU's critical path, more tokens); the
    # labels are the search's without it (LabelConfig.speculate)
    speculate: bool = True
    # binary-search: a prefix whose success rate is under this fraction of the last live prefix's counts as dead
    # (a wrong step the model recovers from now and then), None = any success is alive (LabelConfig.relative_drop)
    relative_drop: float | None = DEFAULT_RELATIVE_DROP
    reach_gate: bool = False  # binary-search behind a reach gate (pipeline.labeling.reach; LabelConfig.reach_gate)
    trust_pass_rate: float = DEFAULT_TRUST_PASS_RATE  # reach_gate: trust a right answer from this pass rate on
    unreached_claim: str = DEFAULT_UNREACHED_CLAIM  # reach_gate: an unreached row's first error (LabelConfig.unreached_claim)
    reach_probe: str = DEFAULT_REACH_PROBE  # reach_gate: where the pass rate comes from (LabelConfig.reach_probe)


def row_extra(outcome: StrategyOutcome, params: StrategyParams) -> dict:
    """What a labeled row records about how its draws were made: the strategy's own notes, the sampling design
    and the wave schedule (size, growth), from which the row builder (pipeline.storage.schema) computes each
    step's estimate and exact interval. An interval computed for another schedule than the one drawn does not
    cover at its stated rate, so every producer of rows builds this here."""
    return {**outcome.extra, "design": outcome.design, "wave": params.wave_size, "growth": params.wave_growth}


def _alive(st: StepStats) -> bool | None:
    if st.correct > 0:
        return True
    if st.graded > 0:
        return False
    return None


def _finish(labels: list[bool | None], stats: list[StepStats], design: str = FIXED) -> StrategyOutcome:
    first_error = next((i for i, lab in enumerate(labels) if lab is False), -1)
    return StrategyOutcome(labels=labels, stats=stats, first_error=first_error, design=design)


def _add(stats: list[StepStats], results: list[ProbeResult]) -> None:
    for r in results:
        st = stats[r.step]
        graded = r.n - r.ungradable
        if st.first_n == 0 and graded > 0:  # the step's first own wave with a graded draw
            st.first_n, st.first_correct = graded, r.correct
        st.total += r.n
        st.correct += r.correct
        st.ungradable += r.ungradable
        st.no_answer += r.no_answer
        st.unreadable += r.unreadable
        for j, g, c in r.deep or ((r.step, graded, r.correct),):
            stats[j].deep_n += g
            stats[j].deep_correct += c
        for u in r.reused:
            later = stats[u.step]
            later.total += u.n
            later.reused += u.n
            later.correct += u.correct
            later.reused_correct += u.correct
            later.ungradable += u.ungradable
            later.reused_ungradable += u.ungradable
            later.no_answer += u.no_answer
            later.unreadable += u.unreadable


def per_step(n_steps: int, solution_correct: bool | None, p: StrategyParams) -> StrategyGen:
    """Math-Shepherd: K continuations from every prefix but the last, all in one round."""
    stats = [StepStats() for _ in range(n_steps)]
    labels: list[bool | None] = [None] * n_steps
    last = n_steps - 1
    if p.trust_correct and solution_correct:
        return _finish([True] * n_steps, stats)
    if last > 0:
        results = yield [Probe(i, p.k) for i in range(last)]
        _add(stats, results)
        for i in range(last):
            labels[i] = _alive(stats[i])
    labels[last] = last_step_label(solution_correct)
    return _finish(labels, stats, FIXED)


def _estimate(step: int, stats: list[StepStats], p: StrategyParams, early_stop: bool,
              ahead: tuple[int, ...] = ()):
    """Sub-generator: continuations from prefix ``step`` until its alive/dead question is decided.

    Without ``early_stop`` one probe of K. With it, waves until the first success (alive) or K graded failures
    (dead): the same decision as "at least one of K succeeds", for fewer continuations when the prefix is alive.
    The first wave has ``wave_size`` draws and each next one ``wave_growth`` times more (2, 4, 8, 6 for K=20:
    a dead prefix takes 4 rounds instead of 10, the rounds being what a GPU waits on; the first wave, whose
    fraction is the step's unbiased ``mc_value``, is unchanged). With ``confidence_width`` an alive prefix keeps
    sampling (up to K) until the 95% Wilson interval of its MC value is narrower than the width.

    ``ahead``: steps that get their first wave in this probe's first round, alongside it (binary-search's
    speculation: the prefixes the search may probe next). A step that already has draws of its own continues
    from them on the same wave schedule, and is decided without a round if they already decide it.

    K and the stop count the prefix's own draws only: draws credited by rollout reuse make a prefix
    alive when one succeeded, but never stand in for its own K (so a dead prefix failed K draws of its own, as
    per-step would have it), and the sampling design stays the one ``mc_value`` and the intervals assume.
    """
    st = stats[step]

    def decided() -> bool:
        if st.own_total >= p.k:
            return True
        if not early_stop or st.own_correct == 0:
            return False
        return p.confidence_width is None or 2 * _wilson_halfwidth(st.own_correct, st.own_graded) <= p.confidence_width

    # a speculative first wave is one wave (drawing its later waves ahead would give a step the search may
    # never probe more draws than the schedule: Probe.later is for the probe's own step)
    extra = [Probe(j, min(p.wave_size, p.k)) for j in ahead if stats[j].own_total == 0]
    while not decided():
        left = p.k - st.own_total
        n = left if not early_stop else min(next_wave(st.own_total, p.wave_size, p.wave_growth), left)
        results = yield [Probe(step, n, _later_waves(st.own_total + n, p, early_stop))] + extra
        extra = []
        _add(stats, results)
    return _alive(st)


def _later_waves(done: int, p: StrategyParams, early_stop: bool) -> tuple[int, ...]:
    """The waves a first-success probe draws after ``done`` own draws if none of them succeeds, up to K
    (:attr:`Probe.later`); none for a design that decides otherwise (fixed K, a confidence width)."""
    if not early_stop or p.confidence_width is not None:
        return ()
    out = []
    while done < p.k:
        w = min(next_wave(done, p.wave_size, p.wave_growth), p.k - done)
        out.append(w)
        done += w
    return tuple(out)


def _early_design(p: StrategyParams, early_stop: bool = True) -> str:
    """The sampling design of ``_estimate``'s probes (pipeline.stats.intervals)."""
    if not early_stop:
        return FIXED
    return FIRST_SUCCESS if p.confidence_width is None else FIRST_WAVE


def binary_search(n_steps: int, solution_correct: bool | None, p: StrategyParams) -> StrategyGen:
    """OmegaPRM-style bisection for the first dead prefix (O(K log M) continuations).

    Invariant: prefix ``lo`` is alive (``lo = -1`` is the bare problem, assumed solvable) and prefix ``hi`` is
    dead (``hi = last`` when the solution's own answer is wrong). Steps ``<= lo`` are positive, ``hi`` is
    negative, steps after ``hi`` are unlabeled. Steps probed on the way keep their MC estimate.
    With ``early_stop`` (the default) each probe samples in waves and stops at its first success.

    The probe is :func:`_probe_point`, ``bisect_fraction`` of the way from ``lo`` to ``hi`` (default 0.5: the
    midpoint). Above 0.5 later prefixes go first: a live late prefix settles every step before it at once and is
    the cheap, reliable probe, while an early prefix of a long solution can be alive and still fail K times.
    Measured on the bundled task (BENCHMARKS.md, "Strategies x label rules", 1,440 solutions): 0.6 gives +0.037 first-error F1 at
    K=8 (paired 95% interval +0.016 to +0.057); it is the default (LabelConfig.bisect_fraction).

    With ``relative_drop`` (rho) a probe is compared with the last live prefix ``lo`` rather than with zero: a
    success rate (Jeffreys-smoothed) under rho x ``lo``'s makes it dead (:func:`_dropped`: a wrong step the model
    recovers from now and then), and the probe stops at the last draw whose success could still count
    (:func:`_relative_cap`). The stored labels then follow this rule, not the ``hard`` rule recomputed from the
    counts. Successes credited by rollout reuse move ``lo`` forward without a probe (see below).
    """
    stats = [StepStats() for _ in range(n_steps)]
    if solution_correct and p.trust_correct:
        return _finish([True] * n_steps, stats)
    return (yield from _bisect(n_steps, solution_correct, p, stats))


def _bisect(n_steps: int, solution_correct: bool | None, p: StrategyParams, stats: list[StepStats],
            lo: int = -1, hi: int | None = None, probed: set[int] | None = None) -> StrategyGen:
    """:func:`binary_search`'s search from a live prefix ``lo`` and a dead one ``hi`` (None: the end), over
    ``stats`` that may already hold draws of the steps in ``probed`` (the reach gate's first-step probe,
    :mod:`pipeline.labeling.reach`)."""
    last = n_steps - 1
    # Not trusting a correct final answer: search as if the end were dead and accept "all alive".
    top = n_steps if solution_correct else last
    if hi is None:
        hi = top
    probed = set() if probed is None else set(probed)
    # A right answer's full prefix is alive by the solution's own answer, and whatever its draws said its step
    # would get the last-step rule's label: it is never drawn, nor speculated on.
    known_alive = last if solution_correct else None
    while hi - lo > 1:
        mid = _probe_point(lo, hi, p.bisect_fraction)
        if mid == known_alive:
            lo = mid
            continue
        probed.add(mid)
        ahead = tuple(q for q in (_probe_point(a, b, p.bisect_fraction) for a, b in ((lo, mid), (mid, hi))
                                  if b - a > 1) if q != known_alive) if p.speculate and p.early_stop else ()
        alive = yield from _estimate(mid, stats, _relative_cap(stats, lo, p), p.early_stop, ahead)
        # All continuations ungradable: no evidence either way. Treat as alive (never invent an error from
        # missing evidence); the step's label stays null below.
        if alive and _dropped(stats, mid, lo, p.relative_drop):
            alive = False
        if alive is None or alive:
            lo = mid
        else:
            hi = mid
        # Rollout reuse: a success credited to a later prefix proves it alive (and every prefix before it: the
        # solution's own steps up to there, then that continuation, reach the gold answer). The search moves past
        # it; should it be at or past ``hi``, ``hi``'s failures were a false "dead" and the search reopens up to
        # the end.
        # (a speculative first wave counts only once its step is probed: the labels are the search's without it)
        proven = max((j for j in range(lo + 1, min(top, last))
                      if (stats[j].reused_correct > 0 or (j in probed and stats[j].correct > 0))
                      and not _dropped(stats, j, lo, p.relative_drop)), default=lo)
        if proven > lo:
            lo = proven
            if lo >= hi:
                hi = top
    labels: list[bool | None] = [None] * n_steps
    for i in range(min(hi, n_steps)):  # a speculative first wave that was never probed is no evidence here
        seen = stats[i].total if i in probed else stats[i].reused
        labels[i] = True if seen == 0 or _alive(stats[i]) else None
    if hi < n_steps:
        labels[hi] = False if hi < last else last_step_label(solution_correct)
    if hi == n_steps:  # everything alive
        labels[last] = last_step_label(solution_correct)
    return _finish(labels, stats, _early_design(p, p.early_stop))


def _rate(st: StepStats) -> float:
    return (st.correct + 0.5) / (st.graded + 1.0)


def _dropped(stats: list[StepStats], j: int, lo: int, rho: float | None) -> bool:
    """Prefix ``j`` succeeds at under ``rho`` x the rate of the live prefix ``lo`` (Jeffreys-smoothed)."""
    return rho is not None and lo >= 0 and stats[lo].graded > 0 and _rate(stats[j]) < rho * _rate(stats[lo])


def _relative_cap(stats: list[StepStats], lo: int, p: StrategyParams) -> StrategyParams:
    """``p`` with K lowered to the last draw whose success would still count against live prefix ``lo``
    (:func:`_dropped`): past it a probe could only end dead, so it stops there."""
    if p.relative_drop is None or lo < 0 or stats[lo].graded == 0 or not p.early_stop:
        return p
    cap = math.floor(1.5 / (p.relative_drop * _rate(stats[lo])) - 1.0)
    return p if cap >= p.k else dataclasses.replace(p, k=max(1, cap))


def _probe_point(lo: int, hi: int, fraction: float) -> int:
    """The step ``fraction`` of the way from ``lo`` to ``hi`` (rounded half down, so 0.5 is the classic
    ``(lo + hi) // 2``), strictly between them."""
    return lo + max(1, min(hi - lo - 1, math.ceil(fraction * (hi - lo) - 0.5)))


def _wilson_halfwidth(successes: int, n: int) -> float:
    iv = wilson(successes, n)
    return 1.0 if iv is None else (iv[1] - iv[0]) / 2


def adaptive(n_steps: int, solution_correct: bool | None, p: StrategyParams) -> StrategyGen:
    """Math-Shepherd's estimate, stopped as early as the hard labels allow.

    Steps are scanned from the first: each samples waves of ``wave_size`` continuations until its first
    success (positive) or ``k`` graded failures (negative); the scan stops at the first negative step, and the
    steps after it stay unlabeled. Every hard label is the one per-step would give from the same K draws,
    and ``first_error`` is per-step's first negative step; only the continuations are fewer. With
    ``confidence_width`` positive steps keep sampling (up to ``k``) until the 95% Wilson interval of their
    MC value is narrower than the width, for soft labels worth training on.
    """
    stats = [StepStats() for _ in range(n_steps)]
    last = n_steps - 1
    if solution_correct and p.trust_correct:
        return _finish([True] * n_steps, stats)
    labels: list[bool | None] = [None] * n_steps
    for i in range(last):
        alive = yield from _estimate(i, stats, p, early_stop=True)
        labels[i] = alive
        if alive is False:
            return _finish(labels, stats, _early_design(p))
    labels[last] = last_step_label(solution_correct)
    return _finish(labels, stats, _early_design(p))


def _scan_cost(steps: int) -> float:
    return float(max(1, steps - 1))  # every prefix but the last is sampled


def _bisect_cost(steps: int) -> float:
    return 1.0 + math.log2(max(1, steps))  # about 1 + log2(steps) probes


@dataclass(frozen=True)
class Strategy:
    """One labeling strategy, described: its name (``--strategy NAME``), its generator, a solution's expected
    labeling work from its number of steps (shard sizing, :mod:`pipeline.execution.sizing`), and whether a
    solution with a right final answer is labeled positive without rollouts by default (``--trust-correct``),
    and the strategies' options it reads (those declared ``strategy_option``; the others it ignores, so their
    setting is no part of its corpus's identity)."""

    name: str
    run: Callable[[int, bool | None, StrategyParams], StrategyGen]
    cost: Callable[[int], float] = _scan_cost
    trusts_correct: bool = True
    reads: frozenset[str] = frozenset()
    # its generator behind the reach gate (--reach-gate), where it has one (registered by pipeline.labeling.reach)
    gated: Callable[[int, bool | None, StrategyParams], StrategyGen] | None = None


# The registry: ``--strategy``'s choices, its help, the config's check and the shard sizing all read it, so a
# new strategy is its generator and one entry here (:func:`register_strategy`).
STRATEGIES: dict[str, Strategy] = {}


def register_strategy(strategy: Strategy) -> Strategy:
    STRATEGIES[strategy.name] = strategy
    return strategy


_WAVES = frozenset({"wave_size", "wave_growth", "confidence_width"})
for _s in (Strategy("per-step", per_step, trusts_correct=False),
           Strategy("binary-search", binary_search, _bisect_cost,
                    reads=_WAVES | {"speculate", "early_stop", "bisect_fraction", "relative_drop", "reach_gate",
                                    "trust_pass_rate", "unreached_claim", "reach_probe"}),
           Strategy("adaptive", adaptive, reads=_WAVES)):
    register_strategy(_s)
# sequential (pipeline.labeling.sequential) registers itself after these, as the reach gate does its gated generator


def make_strategy(name: str, n_steps: int, solution_correct: bool | None, params: StrategyParams) -> StrategyGen:
    try:
        fn = STRATEGIES[name].run
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}") from None
    if params.reach_gate:
        fn = STRATEGIES[name].gated
        if fn is None:
            gated = " or ".join(n for n, st in STRATEGIES.items() if st.gated) or "binary-search"
            raise ValueError(f"reach gating is an option of {gated}, not of {name!r}")
    return fn(n_steps, solution_correct, params)
