"""The result of grading one (gold, response) pair."""

from __future__ import annotations

from dataclasses import dataclass, field

NO_ANSWER = "no answer found"

# Why a pair has no verdict (Verdict.kind). The grader owns the verdict and this reason; what a label does with
# each one is the labeler's rule (pipeline.labeling.last_step.outcome), stated once there.
VERDICT = "verdict"  # a readable answer compared with the gold: correct is True or False
NO_ANSWER_KIND = "no_answer"  # no final answer in the response (correct is False)
UNREADABLE = "unreadable"  # an answer was found but could not be read or decided (correct is None)
REJECTED = "rejected"  # the pre-screen refused the response's answer (too large to evaluate safely; None)
GOLD = "gold"  # the gold answer itself cannot be read: no fault of the response (None)
TIMEOUT = "timeout"  # grader infrastructure: the comparison ran out of its budget (None)
CRASH = "crash"  # grader infrastructure: a worker crashed or raised (None)
INFRASTRUCTURE = (TIMEOUT, CRASH)
KINDS = (VERDICT, NO_ANSWER_KIND, UNREADABLE, REJECTED, GOLD, TIMEOUT, CRASH)


def kind_of(correct: bool | None, reason: str, extracted: str | None) -> str:
    """The :data:`KINDS` entry of a verdict, from its fields (graders may also set it explicitly)."""
    if extracted is None and reason == NO_ANSWER:
        return NO_ANSWER_KIND
    if correct is not None:
        return VERDICT
    r = reason.lower()
    if r.startswith("timeout"):
        return TIMEOUT
    if r.startswith(("worker crashed", "out of memory", "grader error", "math-verify failed")):
        return CRASH
    if r.startswith("gold"):
        return GOLD
    if r.startswith("too large"):
        return REJECTED
    return UNREADABLE


@dataclass(frozen=True)
class Verdict:
    """``correct`` is True, False, or None when the pair could not be decided.

    A response with no final answer (cut off at ``max_new_tokens``, rambling) is ``correct=False`` with
    ``reason == "no answer found"`` and ``extracted=None``: it did not reach the gold answer (Math-Shepherd
    counts it so). :attr:`no_answer` tells these apart from a wrong answer.

    ``None`` (ungradable) is kept for an answer that exists but cannot be decided: unparseable, rejected by
    the pre-screen (too large to evaluate safely), a comparison that ran out of time, a gold answer that
    cannot be read. ``reason`` always says which rule decided (``"numeric: exact"``, ``"timeout"``, ...),
    so a ``False`` is never silent. ``extracted`` is the answer text taken from the response.
    """

    correct: bool | None
    reason: str
    extracted: str | None = None
    # one of KINDS; "" = derived from the fields by kind_of (graders that know better set it). Not part of
    # equality: two verdicts with the same fields are the same verdict however their kind was stated.
    why: str = field(default="", compare=False)

    @property
    def kind(self) -> str:
        """Why this verdict is what it is: :data:`VERDICT`, or the reason there is none (see :data:`KINDS`)."""
        return self.why or kind_of(self.correct, self.reason, self.extracted)

    @property
    def no_answer(self) -> bool:
        """The response has no extractable final answer (counted as not reaching the gold answer)."""
        return self.extracted is None and self.reason == NO_ANSWER

    def as_dict(self) -> dict:
        return {"correct": self.correct, "reason": self.reason, "extracted": self.extracted}
