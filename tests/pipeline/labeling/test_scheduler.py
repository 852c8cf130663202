"""The scheduler on a scripted fake engine: batching per round, streaming mode, ungradable counts, errors."""

from __future__ import annotations

import pytest

from graders.verdict import Verdict
from pipeline.labeling.scheduler import Scheduler, SchedulerSettings
from pipeline.labeling.strategies import StrategyParams
from pipeline.solution import Solution
from rollouts.base import BackendStats, Completion


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


def _grade(pairs):
    # an UNGRADABLE response: a grader infrastructure failure (timeout), excluded from the counts
    return [Verdict(None, "timeout", "x") if "UNGRADABLE" in r else Verdict(("\\boxed{" + g + "}") in r, "numeric", "x")
            for g, r in pairs]


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
    sched = Scheduler(be, _grade, _Plain(),
                      SchedulerSettings(strategy, StrategyParams(k=4, speculate=False), seed=1))
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
    sched = Scheduler(UB({}), _grade, _Plain(), SchedulerSettings("per-step", StrategyParams(k=4), seed=1))
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
    sync = Scheduler(ScriptedBackend(alive), _grade, _Plain(),
                     SchedulerSettings(strategy, params, streaming=False))
    a = sync.label(sols)
    be = StreamingBackend(alive)
    stream = Scheduler(be, _grade, _Plain(), SchedulerSettings(strategy, params, streaming=True))
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
    sched = Scheduler(Failing(alive), _grade, _Plain(),
                      SchedulerSettings("per-step", StrategyParams(k=2), streaming=True))
    with pytest.raises(RuntimeError, match=r"solution 's3' \(in.jsonl:4\) \(prefix ending at step 1 of 3\): "
                                           r"prompt is longer than the maximum model length"):
        sched.label(sols)
