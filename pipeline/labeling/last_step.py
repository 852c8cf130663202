"""The last-step rule, in one place.

A solution's last step ends with its own final answer, so it needs no rollouts: the solution itself is graded
once against the gold answer, and that verdict is the last step's hard label (``True``, ``False``, or ``None``
when the grader cannot decide; no final answer at all is ``False``). Its ``mc_value`` is then 1.0 or 0.0 with
``mc_total`` 0 (Math-Shepherd's convention). The scheduler grades the solution (:func:`own_response`,
:func:`own_correct`), every strategy labels the last step with :func:`last_step_label`, and the shard schema
values it with :func:`last_step_value`.
"""

from __future__ import annotations

from pipeline.labeling.types import Solution, StepStats


def own_response(solution: Solution) -> str:
    """The text graded for the last step: the solution's full text."""
    return "\n".join(solution.steps)


def is_no_answer(verdict) -> bool:
    """A response with no final answer: graded incorrect, whatever ``correct`` a (third-party) grader set."""
    return verdict.correct is not True and bool(getattr(verdict, "no_answer", False))


def own_correct(verdict) -> bool | None:
    """Whether the solution's own final answer is right (None: the grader could not decide)."""
    return False if is_no_answer(verdict) else verdict.correct


def last_step_label(solution_correct: bool | None) -> bool | None:
    """The hard label of the last step: the solution's own answer."""
    return solution_correct


def last_step_value(stats: StepStats, solution_correct: bool | None) -> float | None:
    """The last step's ``mc_value``: its own estimate if it was sampled, else 1.0 or 0.0 from the own answer."""
    v = stats.value
    if v is None and solution_correct is not None and stats.total == 0:
        v = 1.0 if solution_correct else 0.0
    return v
