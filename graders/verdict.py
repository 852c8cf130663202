"""The result of grading one (gold, response) pair."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    """``correct`` is True, False, or None when the pair could not be graded.

    ``None`` (ungradable) covers: no answer found in the response, an answer that cannot be parsed, an
    input rejected by the pre-screen (too large to evaluate safely), and a comparison that ran out of time.
    ``reason`` always says which rule decided (``"numeric: exact"``, ``"timeout"``, ...), so a ``False`` is
    never silent. ``extracted`` is the answer text taken from the response (None when nothing was found).
    """

    correct: bool | None
    reason: str
    extracted: str | None = None

    def as_dict(self) -> dict:
        return {"correct": self.correct, "reason": self.reason, "extracted": self.extracted}
