"""Issue 24: one rule for what a graded continuation counts as. An answer the grader cannot read did not reach
the gold answer (a failure, visibly counted); grader infrastructure failures are never a verdict."""

from __future__ import annotations

import pytest

from graders.verdict import Verdict
from pipeline.labeling.last_step import CORRECT, EXCLUDED, FAILURE, outcome
from pipeline.labeling.rules import StepCount, get_rule
from pipeline.labeling.scheduler import Scheduler, SchedulerSettings
from pipeline.labeling.strategies import StrategyParams
from pipeline.solution import Solution
from pipeline.storage.schema import to_table
from tests.pipeline.labeling.test_no_answer import Plain, Scripted

RIGHT, WRONG, GARBAGE, SLOW = "\\boxed{GOLD}", "\\boxed{WRONG}", "}.......C9 *7 9}", "TIMEOUT"


@pytest.mark.parametrize("verdict,failure_policy,exclude_policy", [
    (Verdict(True, "numeric: exact", "7"), CORRECT, CORRECT),
    (Verdict(False, "numeric: mismatch", "8"), FAILURE, FAILURE),
    (Verdict(False, "no answer found", None), FAILURE, FAILURE),
    (Verdict(None, "unparseable answer", "}...C9"), FAILURE, EXCLUDED),
    (Verdict(None, "too large to evaluate safely", "9" * 5000), FAILURE, EXCLUDED),
    (Verdict(None, "timeout after 2.0 s", "x"), EXCLUDED, EXCLUDED),
    (Verdict(None, "worker crashed", "x"), EXCLUDED, EXCLUDED),
    (Verdict(None, "gold answer unreadable", "x"), EXCLUDED, EXCLUDED),
])
def test_outcome_of_every_reason(verdict, failure_policy, exclude_policy):
    assert outcome(verdict) == failure_policy
    assert outcome(verdict, "exclude") == exclude_policy


def _grade(pairs):
    out = []
    for _gold, r in pairs:
        if r.endswith(RIGHT):
            out.append(Verdict(True, "numeric: exact", "GOLD"))
        elif r.endswith(WRONG):
            out.append(Verdict(False, "numeric: mismatch", "WRONG"))
        elif r.endswith(SLOW):
            out.append(Verdict(None, "timeout after 2.0 s", "x"))
        else:
            out.append(Verdict(None, "unparseable answer", GARBAGE))
    return out


SOL = Solution(id="s", problem="p", answer="GOLD", steps=("a", "b", "c", "The answer is " + WRONG))
# prefix 0: 1 right, 2 unreadable, 1 timeout; prefix 1: 4 unreadable; prefix 2: 1 right, 3 wrong
SCRIPT = {0: [RIGHT, GARBAGE, GARBAGE, SLOW], 1: [GARBAGE] * 4, 2: [RIGHT, WRONG, WRONG, WRONG]}


def test_unreadable_answers_are_failures_by_default_and_counted():
    sched = Scheduler(Scripted(SCRIPT), _grade, Plain(), SchedulerSettings("per-step", StrategyParams(k=4)))
    (o,) = sched.label([SOL])
    assert [s.unreadable for s in o.stats] == [2, 4, 0, 0]
    assert [s.ungradable for s in o.stats] == [1, 0, 0, 0]  # only the timeout
    assert [s.graded for s in o.stats[:3]] == [3, 4, 4]
    # prefix 1: every continuation unreadable, none reached the gold answer: a dead prefix (was "no evidence")
    assert o.stats[1].value == 0.0 and o.labels[1] is False and o.first_error == 1
    assert sched.stats.unreadable == 6
    row = to_table([o], 4).to_pylist()[0]
    assert row["mc_unreadable"] == [2, 4, 0, 0] and row["mc_value"][:3] == [pytest.approx(1 / 3), 0.0, 0.25]


def test_unreadable_excluded_when_asked():
    sched = Scheduler(Scripted(SCRIPT), _grade, Plain(),
                      SchedulerSettings("per-step", StrategyParams(k=4), unreadable="exclude"))
    (o,) = sched.label([SOL])
    assert [s.ungradable for s in o.stats[:3]] == [3, 4, 0]
    assert o.stats[1].value is None and o.labels[1] is None  # nothing graded at prefix 1: no label
    assert o.labels[2] is True


def test_ratio_rule_is_genprm_relative_progress_against_the_adjacent_step():
    # v = 0.5, 0.45 (ratio 0.9 >= 0.8), 0.3 (0.667 < 0.8), unestimated, 0.3 (its neighbour unestimated: stored label)
    steps = [StepCount(4, 8, 0.5, True), StepCount(9, 20, 0.45, True), StepCount(3, 10, 0.3, True),
             StepCount(0, 0, None, True), StepCount(3, 10, 0.3, False), StepCount(0, 0, 0.0, False)]
    r = get_rule("ratio")(steps, False)
    assert r.labels[:5] == [True, True, False, True, False] and r.first_error == 2
    assert r.scores[1] == pytest.approx(0.9) and r.scores[2] == pytest.approx(0.3 / 0.45)
    # the difference rule (relative) with its default delta 0.5 keeps step 2 (0.3 - 0.45 > -0.5): not GenPRM's rule
    assert get_rule("relative")(steps, False).labels[2] is True
