"""The last-step rule, in one place.

A solution's last step ends with its own final answer, so it needs no rollouts: the solution itself is graded
once against the gold answer, and that verdict is the last step's hard label (``True``, ``False``, or ``None``
when the grader cannot decide; no final answer at all is ``False``). Its ``mc_value`` is then 1.0 or 0.0 with
``mc_total`` 0 (Math-Shepherd's convention). The scheduler grades the solution (:func:`own_response`,
:func:`own_correct`), every strategy labels the last step with :func:`last_step_label`, and the shard schema
values it with :func:`pipeline.solution.last_step_value` (on the ground floor, below labeling).
"""

from __future__ import annotations

import graders.verdict as V
from pipeline.solution import Solution


def own_response(solution: Solution) -> str:
    """The text graded for the last step: the solution's full text."""
    return "\n".join(solution.steps)


CORRECT, FAILURE, EXCLUDED = "correct", "failure", "excluded"


def outcome(verdict, unreadable: str = "failure") -> str:
    """The one rule of what a graded continuation counts as (labeling, `stats` and the notes all use it), from why the grader decided
    (:attr:`graders.verdict.Verdict.kind`):

    * a readable answer equal to the gold -> ``correct``; readable and different -> ``failure``;
    * no final answer (cut off at ``max_new_tokens``, rambling), an answer the grader could not read, or one
      its pre-screen refused -> ``failure``: the continuation did not reach a readable, correct answer, so it
      did not reach the gold answer (Math-Shepherd's rule). ``unreadable="exclude"`` (``--unreadable exclude``,
      schema 3's behaviour) leaves unreadable and refused answers out instead;
    * a grader infrastructure failure (timeout, crash) or a gold answer that cannot be read -> ``excluded``:
      never a verdict on the continuation (the grader retries a timeout once first).
    """
    if verdict.correct is True:
        return CORRECT
    kind = verdict.kind
    if kind in (V.VERDICT, V.NO_ANSWER_KIND):
        return FAILURE
    if kind in (V.UNREADABLE, V.REJECTED):
        return FAILURE if unreadable == "failure" else EXCLUDED
    return EXCLUDED


def is_no_answer(verdict) -> bool:
    """A response with no final answer: graded incorrect, whatever ``correct`` a (third-party) grader set."""
    return verdict.correct is not True and verdict.kind == V.NO_ANSWER_KIND


def is_unreadable(verdict) -> bool:
    """An answer was found but the grader could not read it or refused it (a failure by default)."""
    return verdict.correct is not True and verdict.kind in (V.UNREADABLE, V.REJECTED)


def own_correct(verdict, unreadable: str = "failure") -> bool | None:
    """Whether the solution's own final answer is right, by :func:`outcome`'s rule (None: excluded)."""
    o = outcome(verdict, unreadable)
    return None if o == EXCLUDED else o == CORRECT


def last_step_label(solution_correct: bool | None) -> bool | None:
    """The hard label of the last step: the solution's own answer."""
    return solution_correct
