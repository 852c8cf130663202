"""``--grader math-verify`` grades in the killable worker processes, with the sympy grader's budgets: an answer
that makes Math-Verify compute for ever (a power tower, which holds the GIL and ignores its signal-based time
limit) becomes a timeout verdict instead of wedging the labeling worker. Real Math-Verify, real subprocesses."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("math_verify")

from graders import GraderConfig, get_grader  # noqa: E402
from graders.pool import get_pool  # noqa: E402
from graders.verdict import NO_ANSWER_KIND, TIMEOUT, VERDICT  # noqa: E402


def test_math_verify_grades_in_the_worker_processes(monkeypatch):
    import math_verify

    def not_here(*a, **k):
        raise AssertionError("Math-Verify ran in the labeling process")

    monkeypatch.setattr(math_verify, "parse", not_here)  # this process only: the workers are fresh interpreters
    monkeypatch.setattr(math_verify, "verify", not_here)
    g = get_grader("math-verify")
    cfg = GraderConfig(timeout_s=2.0, workers=1)
    verdicts = g.grade_batch([("\\frac{1}{2}", "so \\boxed{0.5}"), ("3", "\\boxed{4}"), ("3", "no idea")], cfg)
    assert [v.correct for v in verdicts] == [True, False, False]
    assert [v.why for v in verdicts] == [VERDICT, VERDICT, NO_ANSWER_KIND]
    assert verdicts[0].reason == "math-verify"
    assert get_pool(1).pids  # graded there, not in this process


def test_power_tower_is_a_timeout_in_a_killable_worker_not_a_wedged_thread():
    """Graded from a non-main thread, as a labeling worker does: the tower never runs in this process."""
    g = get_grader("math-verify")
    cfg = GraderConfig(timeout_s=0.5, workers=1)
    out: list = []
    t = threading.Thread(target=lambda: out.extend(g.grade_batch(
        [("1", "\\boxed{9^{9^{9^{9}}}}"), ("2", "\\boxed{2}")], cfg)))
    t.start()
    t.join(300)  # a backstop for a broken build only: nothing here depends on how long it takes
    assert not t.is_alive()
    tower, fine = out
    assert tower.correct is None and tower.why == TIMEOUT, tower
    assert fine.correct is True
