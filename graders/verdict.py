"""The result of grading one (gold, response) pair."""

from __future__ import annotations

from dataclasses import dataclass

NO_ANSWER = "no answer found"


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

    @property
    def no_answer(self) -> bool:
        """The response has no extractable final answer (counted as not reaching the gold answer)."""
        return self.extracted is None and self.reason == NO_ANSWER

    def as_dict(self) -> dict:
        return {"correct": self.correct, "reason": self.reason, "extracted": self.extracted}
