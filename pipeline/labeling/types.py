"""The one data model of mcprm: a solution to label, and what labeling found out about it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field


def content_key(problem: str, answer: str, steps: list[str] | tuple[str, ...]) -> str:
    """Stable identity of a solution by content (problem, gold answer, steps): 16 hex chars of sha256."""
    blob = json.dumps([problem, answer, list(steps)], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Solution:
    """One step-by-step solution of one problem, validated and ready to label."""

    id: str
    problem: str
    answer: str  # gold answer
    steps: tuple[str, ...]
    source: str = ""  # "file:row" where it came from (for error messages and rejects)

    @property
    def key(self) -> str:
        return content_key(self.problem, self.answer, self.steps)


@dataclass
class StepStats:
    """Monte Carlo counts for one step prefix (problem + steps[0..i])."""

    total: int = 0  # continuations run from this prefix
    correct: int = 0  # graded correct
    ungradable: int = 0  # grader returned null: an answer it could not decide (left out of ``value``)
    no_answer: int = 0  # no final answer found: counted as incorrect (in ``total`` and ``graded``, not ``correct``)
    # of ``total``: continuations sampled from an earlier prefix that wrote this prefix's steps verbatim and went
    # on from there (rollout reuse, pipeline.labeling.scheduler.reused_remainders): draws of this prefix at no token cost
    reused: int = 0

    @property
    def graded(self) -> int:
        return self.total - self.ungradable

    @property
    def value(self) -> float | None:
        """Fraction of gradable continuations that reached the gold answer (None if none was gradable).

        A continuation with no final answer is gradable (it did not reach the gold answer, as Math-Shepherd
        counts it); only ``ungradable`` ones (an answer the grader could not decide) are left out.
        """
        return self.correct / self.graded if self.graded > 0 else None


@dataclass
class LabeledSolution:
    solution: Solution
    labels: list[bool | None]  # hard label per step; None = not labeled (e.g. after the first error)
    stats: list[StepStats]
    first_error: int  # index of the first step whose hard label is False, or -1
    solution_correct: bool | None  # does the solution's own final answer match the gold answer
    rollouts: int = 0
    rollout_tokens: int = 0
    strategy: str = ""
    extra: dict = field(default_factory=dict)
