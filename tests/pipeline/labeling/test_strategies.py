"""Strategies on a scripted fake engine: exact labels and exact numbers of rollouts."""

from __future__ import annotations

import math

import pytest

from pipeline.scheduler import Scheduler
from pipeline.strategies import ProbeResult, StrategyParams, make_strategy
from pipeline.types import Solution
from rollouts.base import BackendStats, Completion, SamplingConfig


def drive(name, alive, solution_correct, **kw):
    """Run a strategy where prefix i succeeds on every sample iff alive[i]. Returns (outcome, rollouts, probes)."""
    p = StrategyParams(**kw)
    gen = make_strategy(name, len(alive), solution_correct, p)
    rollouts = 0
    rounds = 0
    try:
        probes = next(gen)
        while True:
            rounds += 1
            res = []
            for pr in probes:
                rollouts += pr.n
                res.append(ProbeResult(pr.step, pr.n, pr.n if alive[pr.step] else 0, 0, 10 * pr.n))
            probes = gen.send(res)
    except StopIteration as stop:
        return stop.value, rollouts, rounds


def test_per_step_counts_and_labels():
    oc, rollouts, rounds = drive("per-step", [True, True, False, False, False], False, k=8)
    assert rollouts == 4 * 8 and rounds == 1
    assert oc.labels == [True, True, False, False, False]
    assert oc.first_error == 2
    assert [s.total for s in oc.stats] == [8, 8, 8, 8, 0]


def test_per_step_last_step_is_the_answer():
    oc, rollouts, _ = drive("per-step", [True, True, True], True, k=4)
    assert rollouts == 8 and oc.labels == [True, True, True] and oc.first_error == -1
    oc, _, _ = drive("per-step", [True, True, True], None, k=4)
    assert oc.labels == [True, True, None] and oc.first_error == -1


def test_single_step_solution_needs_no_rollouts():
    oc, rollouts, rounds = drive("per-step", [False], False, k=8)
    assert rollouts == 0 and rounds == 0 and oc.labels == [False] and oc.first_error == 0


@pytest.mark.parametrize("m,err", [(m, e) for m in (2, 3, 5, 8, 13) for e in (0, 1, 2, 4, 7, 12) if e < m])
def test_binary_search_finds_first_error_in_log_probes(m, err):
    alive = [i < err for i in range(m)]
    oc, rollouts, rounds = drive("binary-search", alive, False, k=8, early_stop=False)
    assert oc.first_error == err
    assert oc.labels[:err] == [True] * err and oc.labels[err] is False
    assert all(x is None for x in oc.labels[err + 1 :])
    assert rollouts == 8 * rounds
    assert rounds <= math.ceil(math.log2(m)) if m > 1 else rounds == 0
    # mc_value kept where estimated
    for i, st in enumerate(oc.stats):
        if st.total:
            assert st.value == (1.0 if alive[i] else 0.0)


def test_binary_search_exact_rollouts():
    # 8 steps, last step dead (answer wrong), first error at 5: bisection over (-1, 7): mid 3 alive, 5 dead, 4 alive
    oc, rollouts, rounds = drive("binary-search", [True] * 5 + [False] * 3, False, k=4, early_stop=False)
    assert (rounds, rollouts) == (3, 12)
    assert oc.first_error == 5
    assert [s.total for s in oc.stats] == [0, 0, 0, 4, 4, 4, 0, 0]
    # early stop (default): an alive probe ends at its first successful wave of 2, a dead one needs all 4
    oc, rollouts, rounds = drive("binary-search", [True] * 5 + [False] * 3, False, k=4, wave_size=2)
    assert (rounds, rollouts) == (4, 8)
    assert oc.first_error == 5
    assert [s.total for s in oc.stats] == [0, 0, 0, 2, 2, 4, 0, 0]


@pytest.mark.parametrize("m,err", [(5, 0), (5, 2), (9, 7), (13, 4)])
def test_binary_search_early_stop_same_decisions(m, err):
    alive = [i < err for i in range(m)]
    full, r_full, _ = drive("binary-search", alive, False, k=8, early_stop=False)
    early, r_early, _ = drive("binary-search", alive, False, k=8, wave_size=1)
    assert early.labels == full.labels and early.first_error == full.first_error == err
    n_alive = sum(1 for st in full.stats if st.total and st.correct)
    n_dead = sum(1 for st in full.stats if st.total and not st.correct)
    assert r_early == n_alive * 1 + n_dead * 8
    assert r_early < r_full if n_alive else r_early == r_full


def test_trust_correct_skips_rollouts():
    for name in ("binary-search", "adaptive", "per-step"):
        oc, rollouts, rounds = drive(name, [True] * 4, True, k=8, trust_correct=True)
        assert (rollouts, rounds) == (0, 0) and oc.labels == [True] * 4 and oc.first_error == -1


def test_binary_search_without_trust_checks_correct_solutions():
    oc, rollouts, _ = drive("binary-search", [True, False, True, True], True, k=2, trust_correct=False)
    assert oc.first_error == 1 and rollouts > 0


def test_adaptive_waves_stop_early():
    # steps 0,1 alive (one wave of 2 each), step 2 dead (k=8 failures: 4 waves), steps 3-4 never sampled
    oc, rollouts, rounds = drive("adaptive", [True, True, False, False, False], False, k=8, wave_size=2)
    assert oc.labels == [True, True, False, None, None]
    assert oc.first_error == 2
    assert (rollouts, rounds) == (2 + 2 + 8, 6)
    assert [s.total for s in oc.stats] == [2, 2, 8, 0, 0]
    # the same hard labels and first error as per-step on the same prefixes
    ps, r_ps, _ = drive("per-step", [True, True, False, False, False], False, k=8)
    assert ps.first_error == oc.first_error and ps.labels[:3] == oc.labels[:3] and r_ps == 32


def test_adaptive_confidence_width_keeps_sampling_positive_steps():
    # all successes: Wilson width shrinks with n; with width 0.5 a positive step needs several waves
    oc, rollouts, _ = drive("adaptive", [True, True, True], True, k=16, wave_size=2, confidence_width=0.5)
    assert oc.labels == [True, True, True]
    assert all(2 <= s.total <= 16 for s in oc.stats[:2])
    oc2, rollouts2, _ = drive("adaptive", [True, True, True], True, k=16, wave_size=2)
    assert rollouts2 == 4 and rollouts > rollouts2


class ScriptedBackend:
    """Fake engine: prefix with step index i (counted by lines after 'Solution:') succeeds iff alive[i]."""

    name = "scripted"

    def __init__(self, alive_by_problem):
        self.alive = alive_by_problem
        self.stats = BackendStats()
        self.calls = []

    def generate(self, requests, sampling):
        self.calls.append(len(requests))
        out = []
        for r in requests:
            problem = r.prompt.split("\n")[0][len("Problem: "):]
            step = r.prompt.split("Solution:\n", 1)[1].count("\n") - 1
            ok = self.alive[problem][step]
            txt = "The answer is \\boxed{GOLD}." if ok else "The answer is \\boxed{WRONG}."
            out.append([Completion(txt, 5) for _ in range(r.n)])
        return out

    def close(self):
        pass


class _V:
    def __init__(self, c):
        self.correct = c


def _grade(pairs):
    return [_V(None if "UNGRADABLE" in r else ("\\boxed{" + g + "}") in r) for g, r in pairs]


class _Plain:
    def prefix(self, problem, steps):
        return f"Problem: {problem}\nSolution:\n" + "".join(s + "\n" for s in steps)


# binary-search (early stop, waves of 2): mid 1 alive (2 samples), mid 2 dead (4) -> 6 per solution
@pytest.mark.parametrize("strategy,expected_rollouts", [("per-step", 3 * 4 * 4), ("binary-search", 3 * 6)])
def test_scheduler_batches_all_solutions_per_round(strategy, expected_rollouts):
    alive = {f"p{i}": [True, True, False, False, False] for i in range(3)}
    sols = [
        Solution(id=f"s{i}", problem=f"p{i}", answer="GOLD", steps=("a", "b", "c", "d", "The answer is \\boxed{WRONG}."))
        for i in range(3)
    ]
    be = ScriptedBackend(alive)
    sched = Scheduler(be, _grade, _Plain(), SamplingConfig(), strategy, StrategyParams(k=4), seed=1)
    out = sched.label(sols)
    assert [o.first_error for o in out] == [2, 2, 2]
    assert sched.stats.rollouts == expected_rollouts
    assert sum(o.rollouts for o in out) == expected_rollouts
    assert sum(o.rollout_tokens for o in out) == 5 * expected_rollouts
    # every round sends the requests of all live solutions in one generate() call
    assert all(c % 3 == 0 for c in be.calls)
    assert all(o.solution_correct is False for o in out)


def test_ungradable_counted_separately():
    class UB(ScriptedBackend):
        def generate(self, requests, sampling):
            return [[Completion("an answer the grader cannot decide: UNGRADABLE", 3) for _ in range(r.n)] for r in requests]

    sols = [Solution(id="s", problem="p", answer="GOLD", steps=("a", "b", "The answer is \\boxed{GOLD}."))]
    sched = Scheduler(UB({}), _grade, _Plain(), SamplingConfig(), "per-step", StrategyParams(k=4), seed=1)
    (o,) = sched.label(sols)
    assert [s.ungradable for s in o.stats] == [4, 4, 0]
    assert o.labels == [None, None, True] and o.first_error == -1


class StreamingBackend(ScriptedBackend):
    """Fake engine with submit(): requests finish out of order on a thread pool."""

    streaming = True

    def __init__(self, alive):
        super().__init__(alive)
        import concurrent.futures

        self.pool = concurrent.futures.ThreadPoolExecutor(4)
        self.submitted = 0

    def submit(self, requests, sampling):
        import random
        import time as _t

        self.submitted += len(requests)

        def one(r):
            _t.sleep(random.random() * 0.003)
            return self.generate([r], sampling)[0]

        return [self.pool.submit(one, r) for r in requests]


@pytest.mark.parametrize("strategy", ["per-step", "binary-search", "adaptive"])
def test_streaming_mode_gives_the_same_labels_and_rollouts(strategy):
    alive = {f"p{i}": [j < i % 6 for j in range(6)] for i in range(12)}
    sols = [Solution(id=f"s{i}", problem=f"p{i}", answer="GOLD",
                     steps=("a", "b", "c", "d", "e", "The answer is \\boxed{WRONG}.")) for i in range(12)]
    params = StrategyParams(k=4, wave_size=2)
    sync = Scheduler(ScriptedBackend(alive), _grade, _Plain(), SamplingConfig(), strategy, params, streaming=False)
    a = sync.label(sols)
    be = StreamingBackend(alive)
    stream = Scheduler(be, _grade, _Plain(), SamplingConfig(), strategy, params)
    assert stream.streaming
    b = stream.label(sols)
    assert [x.labels for x in a] == [x.labels for x in b]
    assert [x.first_error for x in b] == [min(i % 6, 5) for i in range(12)]
    assert stream.stats.rollouts == sync.stats.rollouts and be.submitted == sync.stats.requests


def test_streaming_engine_error_names_the_solution():
    class Failing(StreamingBackend):
        def submit(self, requests, sampling):
            import concurrent.futures

            futs = super().submit(requests, sampling)
            if any(r.prompt.startswith("Problem: p3\n") for r in requests):  # the engine rejects this solution's requests
                bad: concurrent.futures.Future = concurrent.futures.Future()
                bad.set_exception(ValueError("prompt is longer than the maximum model length of 4096"))
                futs[0] = bad
            return futs

    alive = {f"p{i}": [True] * 3 for i in range(5)}
    sols = [Solution(id=f"s{i}", problem=f"p{i}", answer="GOLD", steps=("a", "b", "x"), source=f"in.jsonl:{i + 1}")
            for i in range(5)]
    sched = Scheduler(Failing(alive), _grade, _Plain(), SamplingConfig(), "per-step", StrategyParams(k=2))
    with pytest.raises(RuntimeError, match=r"solution 's3' \(in.jsonl:4\) \(prefix ending at step 1 of 3\): "
                                           r"prompt is longer than the maximum model length"):
        sched.label(sols)
