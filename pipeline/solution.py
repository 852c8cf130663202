"""The one data model of mcprm: a solution to label, and what labeling found out about it.

A leaf module (it imports nothing of mcprm), so every floor can build and read it: input makes
:class:`Solution` rows, labeling makes :class:`LabeledSolution` rows, storage turns them into corpus rows
(:func:`pipeline.storage.schema.to_record`). :func:`last_step_value` is here for the same reason: the schema
values a last step with it, by the last-step rule (:mod:`pipeline.labeling.last_step`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field


def content_key(problem: str, answer: str, steps: list[str] | tuple[str, ...]) -> str:
    """Stable identity of a solution by content (problem, gold answer, steps): 16 hex chars of sha256."""
    blob = json.dumps([problem, answer, list(steps)], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


# label_status of a reach-gated row (pipeline.labeling.reach.reach_gated): no continuation of the bare problem
# (when drawn: --reach-probe bare) or of any prefix the search probed reached the gold answer, so the steps carry no Monte Carlo evidence (mcprm train leaves
# such rows out by default, mcprm stats counts them); a right answer trusted at a high enough pass rate; searched
REACH_STATUSES = (UNREACHED, REACH_TRUSTED, REACH_SEARCHED) = ("unreached", "trusted", "searched")


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
    """Monte Carlo counts for one step prefix (problem + steps[0..i]).

    ``total``/``correct``/``ungradable``/``no_answer``/``unreadable`` count every continuation credited to this
    prefix: its own draws and, with rollout reuse, remainders of earlier prefixes' continuations
    (``reused_*``: the part of each count that came from reuse). What each continuation's verdict counts as is
    :func:`pipeline.labeling.last_step.outcome`'s rule. ``first_*`` is the step's first own wave (a batch fixed
    before any of it was seen: the unbiased estimate of adaptive designs, pipeline.stats.intervals), ``deep_*``
    counts each continuation once, at the deepest prefix it reached (the independent draws the first-error
    model needs, pipeline.stats.changepoint).
    """

    total: int = 0  # continuations counted at this prefix (own + reused)
    correct: int = 0  # reached the gold answer
    ungradable: int = 0  # excluded: grader infrastructure failure (timeout, crash) or an unreadable gold answer
    no_answer: int = 0  # failure: no final answer (in ``total`` and ``graded``, not ``correct``)
    unreadable: int = 0  # failure: an answer the grader could not read or refused (in ``graded``, not ``correct``)
    reused: int = 0  # of ``total``: remainders of earlier prefixes' continuations (rollout reuse), no token cost
    reused_correct: int = 0
    reused_ungradable: int = 0
    first_n: int = 0  # graded draws of the first own wave
    first_correct: int = 0
    deep_n: int = 0  # graded continuations whose deepest prefix is this one
    deep_correct: int = 0

    @property
    def graded(self) -> int:
        return self.total - self.ungradable

    @property
    def own_total(self) -> int:
        return self.total - self.reused

    @property
    def own_graded(self) -> int:
        return self.own_total - (self.ungradable - self.reused_ungradable)

    @property
    def own_correct(self) -> int:
        return self.correct - self.reused_correct

    @property
    def value(self) -> float | None:
        """Fraction of graded continuations (own and reused) that reached the gold answer (None if none was
        graded): the hard label's evidence. The corpus's ``mc_value`` is the design's unbiased estimate instead
        (pipeline.stats.intervals.estimate)."""
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


def last_step_value(stats: StepStats, solution_correct: bool | None) -> float | None:
    """The last step's ``mc_value``: its own estimate if it was sampled, else 1.0 or 0.0 from the own answer."""
    v = stats.value
    if v is None and solution_correct is not None and stats.total == 0:
        v = 1.0 if solution_correct else 0.0
    return v
