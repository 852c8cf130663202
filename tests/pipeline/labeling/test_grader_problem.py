"""Issue 26 item 5: the grader sees the problem text on the labeling path. The scheduler passes each solution's
problem to the grade callable the worker builds (the real graders.grade_batch with the sympy grader), so the
wording policies of docs/grading.md decide the labels: ``(1, 2)`` vs ``(2, 1)`` differ unless the problem says
"in any order"; ``(1, 2)`` vs ``\\{1, 2\\}`` are equal unless the problem asks for an ordered pair."""

from __future__ import annotations

from graders.verdict import Verdict
from pipeline.config import LabelConfig
from pipeline.execution.shard_worker import grade_callable
from pipeline.labeling.scheduler import ProblemGrader, Scheduler, SchedulerSettings
from pipeline.labeling.strategies import StrategyParams
from pipeline.solution import Solution
from rollouts.base import BackendStats, Completion, SamplingConfig
from rollouts.prompts import make_prompt_format
from tests.pipeline.labeling.test_reuse import STEPS, StepWriter, _chars

SWAPPED = "So a = 2 and b = 1: the answer is $\\boxed{(2, 1)}$."
OWN_AS_SET = "The answer is $\\boxed{\\{1, 2\\}}$."
ORDERED = "Find the ordered pair (a, b) with a + b = 3 and a < b."
ANY_ORDER = "Find the two numbers a and b, in any order, with a + b = 3 and ab = 2."
NEITHER = "Find the two numbers a and b with a + b = 3 and ab = 2."


class Swapper:
    """Fake engine: every continuation of every prefix answers ``(2, 1)``."""

    name = "swapper"

    def __init__(self):
        self.stats = BackendStats()

    def generate(self, requests, sampling):
        return [[Completion(SWAPPED, 12) for _ in range(r.n)] for r in requests]

    def close(self):
        pass


def _label(problems, grade):
    sols = [Solution(id=f"s{i}", problem=p, answer="(1, 2)", steps=("a + b = 3", "ab = 2", OWN_AS_SET))
            for i, p in enumerate(problems)]
    sched = Scheduler(Swapper(), grade, make_prompt_format("plain", None),
                      SchedulerSettings("per-step", StrategyParams(k=3), seed=0))
    return sched.label(sols)


def test_the_worker_grader_takes_problems():
    # declared by its type, not probed from its signature: the worker's grader reads problems; the same grading
    # function handed over plain is called with the pairs alone, so the problem's wording is not seen
    grade = grade_callable(LabelConfig(grader_timeout=5.0), 1)
    assert isinstance(grade, ProblemGrader)
    plain_calls = []

    def plain(pairs, problems=None):
        plain_calls.append(problems)
        return grade.fn(pairs, problems=problems)

    ordered, any_order = _label([ORDERED, ANY_ORDER], plain)
    assert plain_calls and all(p is None for p in plain_calls)
    # without the problem text, "in any order" is not seen: (2, 1) vs (1, 2) is wrong for both
    assert [s.correct for s in any_order.stats[:2]] == [0, 0]
    ordered, any_order = _label([ORDERED, ANY_ORDER], ProblemGrader(plain))
    assert [s.correct for s in any_order.stats[:2]] == [3, 3]
    assert plain_calls[-1] is not None


def test_labels_follow_the_problem_wording():
    grade = grade_callable(LabelConfig(grader_timeout=5.0), 1)
    ordered, any_order, neither = _label([ORDERED, ANY_ORDER, NEITHER], grade)
    # (2, 1) against (1, 2): wrong unless the problem says the order does not matter
    assert [s.correct for s in ordered.stats[:2]] == [0, 0]
    assert [s.correct for s in neither.stats[:2]] == [0, 0]
    assert [s.correct for s in any_order.stats[:2]] == [3, 3]
    assert all(s.total == 3 and s.ungradable == 0 for o in (ordered, any_order, neither) for s in o.stats[:2])
    # the solution's own {1, 2} against (1, 2): wrong only where the problem asks for an ordered pair
    assert ordered.solution_correct is False
    assert neither.solution_correct is True and any_order.solution_correct is True
    assert ordered.labels[-1] is False and neither.labels[-1] is True


def test_a_grader_of_pairs_only_still_works():
    seen = []

    def pairs_only(pairs):
        seen.extend(pairs)
        return [Verdict("(1, 2)" in r, "string", "x") for _g, r in pairs]

    (o,) = _label([ORDERED], pairs_only)
    assert o.solution_correct is False and [s.correct for s in o.stats[:2]] == [0, 0]
    assert all(len(p) == 2 for p in seen) and len(seen) == 1 + 2 * 3


def test_reused_remainders_are_graded_with_their_own_problem():
    """Rollout reuse adds remainders after the fresh continuations of every solution: each still carries its
    own solution's problem."""
    log = []

    def grade(pairs, problems=None):
        assert problems is not None and len(problems) == len(pairs)
        log.extend(zip(pairs, problems))
        return [Verdict("\\boxed{" + g + "}" in r, "numeric", "x") for g, r in pairs]

    steps_b = tuple(s.replace("14", "16").replace("2 * c", "2 * c + 2") for s in STEPS)
    sols = [Solution(id="a", problem="Compute d.", answer="14", steps=STEPS),
            Solution(id="b", problem="Compute d plus two.", answer="16", steps=steps_b)]

    class Writer(StepWriter):
        def generate(self, requests, sampling):
            out = []
            for r in requests:
                self.steps = steps_b if "plus two" in r.prompt else STEPS
                out.extend(super().generate([r], sampling))
            return out

    sched = Scheduler(Writer(STEPS), ProblemGrader(grade), make_prompt_format("plain", None),
                      SchedulerSettings("per-step", StrategyParams(k=4),
                                        sampling=SamplingConfig(max_new_tokens=32), reuse=True), encode=_chars)
    sched.label(sols)
    assert sched.stats.reused_rollouts > 0
    by_gold = {"14": "Compute d.", "16": "Compute d plus two."}
    assert len(log) > 2 + sched.stats.rollouts
    assert all(problem == by_gold[gold] for (gold, _r), problem in log)
