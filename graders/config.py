"""Every policy knob of the graders in one frozen (hashable) dataclass."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Literal

DEFAULT_TIMEOUT_S = 2.0  # seconds one answer comparison may take: the one default (mcprm label --grader-timeout)


@dataclass(frozen=True)
class GraderConfig:
    """Policies of the answer graders. Defaults follow Math-Verify / NeMo-Skills where the field agrees.

    Resources
        timeout_s: budget of CPU seconds per verdict that needs sympy (CPU, not wall time: a loaded machine
            gives the same verdicts). A comparison that runs out is retried once with 3x the budget; then
            the verdict is ``None`` with reason ``"timeout"``. Fast-path verdicts never need it.
        workers: size of the sympy worker pool; ``0`` means ``min(4, cpu count)``.
        max_answer_chars: longer (normalized) answers or golds are ungradable (``"too large"``).

    Extraction
        last_number_fallback: when the response marks no answer (no ``\\boxed{}``, ``####`` line, "The
            (final) answer is", "Answer:"), take an unmarked one: a response that is only an answer, a
            short last line that is only an answer, the last LaTeX math span, or the whole math expression
            around the last number (never a fragment of it). ``False``: such a response has no answer.

    Numbers
        rel_tol: relative tolerance between two computed values (float noise), e.g. ``\\sqrt{2}+\\sqrt{3}``
            vs ``\\sqrt{5+2\\sqrt{6}}`` evaluated to 50 digits. Exact rationals are always compared exactly:
            ``0.5`` = ``\\frac12`` = ``1/2`` but ``12345.6`` != ``12345.7``.
        approx_min_sig_digits: a decimal written with ``d`` fractional digits may stand for a value whose
            decimal expansion does not terminate (``1/3``, ``\\pi``, ``\\sqrt2``) when it has at least this
            many significant digits and lies within one unit of its last digit (rounded or truncated):
            ``0.333`` = ``\\frac13``, ``3.14`` = ``\\pi``, ``0.33`` != ``\\frac13``. ``0`` disables this.
        percent: ``"both"`` (default): ``50\\%`` equals ``50`` and ``0.5``; ``"number"``: only ``50``;
            ``"fraction"``: only ``0.5``.

    Structures
        ordered_tuples: ``(1, 2)`` vs ``(2, 1)`` unequal (default). ``False`` compares tuples as multisets.
            Sets ``\\{1, 2\\}`` are always unordered; interval bracket types always matter.
        comma_list: a bare list ``1, 2`` (no brackets): ``"unordered"`` (default, like Math-Verify, which
            reads it as a set) or ``"ordered"``.
        tuple_vs_set: a tuple ``(1, 2)`` against the set ``\\{1, 2\\}`` of the same values.
            ``"auto"`` (default): different when the problem's wording asks for order ("ordered pair",
            "ordered triple", "in order", "in increasing order", ...) or the gold tuple is written out of
            increasing order (``(3, 1)`` is a point), equal otherwise (``(1, 3)`` vs ``\\{1, 3\\}``, also
            without the problem text). ``"equal"``/``"differ"``: always so.
        interval_vs_inequality: ``1 < x \\le 2`` equals ``(1, 2]`` (default True).
        rename_function_variable: ``f(x) = 2x`` equals ``f(t) = 2t`` (and ``2t``): a one-variable function
            is the same function under another variable name (default True).
        equation_lhs_symbol: ``x = 3`` equals ``3`` when the left side is a single symbol (default True).

    The problem text (optional, ``grade_batch(pairs, config, problems=...)``) decides ``"auto"`` policies:
    ordered tuples and tuple vs set as above; "in any order" makes tuples unordered for that problem.

    Symbolic
        symbolic: ``"simplify"`` (default): two expressions are equal when their difference simplifies to 0,
            so ``\\frac{x^2-1}{x-1}`` = ``x+1`` (they agree wherever both are defined); ``"expand"``: only
            when the expanded difference is 0 (no cancellation of common factors).
    """

    timeout_s: float = DEFAULT_TIMEOUT_S
    workers: int = 0
    max_answer_chars: int = 1000
    last_number_fallback: bool = True
    rel_tol: float = 1e-9
    approx_min_sig_digits: int = 3
    percent: Literal["both", "number", "fraction"] = "both"
    ordered_tuples: bool = True
    comma_list: Literal["unordered", "ordered"] = "unordered"
    tuple_vs_set: Literal["auto", "equal", "differ"] = "auto"
    interval_vs_inequality: bool = True
    rename_function_variable: bool = True
    equation_lhs_symbol: bool = True
    symbolic: Literal["simplify", "expand"] = "simplify"

    def __post_init__(self):
        if self.timeout_s <= 0:
            raise ValueError(f"GraderConfig.timeout_s must be > 0, got {self.timeout_s}")
        if self.percent not in ("both", "number", "fraction"):
            raise ValueError(
                f"GraderConfig.percent must be 'both', 'number' or 'fraction', got {self.percent!r}"
            )
        if self.comma_list not in ("unordered", "ordered"):
            raise ValueError(
                f"GraderConfig.comma_list must be 'unordered' or 'ordered', got {self.comma_list!r}"
            )
        if self.tuple_vs_set not in ("auto", "equal", "differ"):
            raise ValueError(
                f"GraderConfig.tuple_vs_set must be 'auto', 'equal' or 'differ', got {self.tuple_vs_set!r}"
            )
        if self.symbolic not in ("simplify", "expand"):
            raise ValueError(f"GraderConfig.symbolic must be 'simplify' or 'expand', got {self.symbolic!r}")

    def as_dict(self) -> dict:
        return asdict(self)

    def policy_id(self) -> str:
        """The options that may change a verdict and differ from their defaults, as ``name=value`` joined by
        commas ("" for the defaults). Resources (``timeout_s``, ``workers``) are not policies."""
        default = GraderConfig()
        parts = [
            f"{f.name}={getattr(self, f.name)}"
            for f in fields(self)
            if f.name not in RESOURCE_FIELDS and getattr(self, f.name) != getattr(default, f.name)
        ]
        return ",".join(parts)

    def for_problem(self, problem: str | None) -> GraderConfig:
        """This config with its ``"auto"`` policies decided for one problem's wording (see the class doc)."""
        if not problem or (self.tuple_vs_set != "auto" and self.ordered_tuples is not True):
            return self
        changes: dict = {}
        if self.tuple_vs_set == "auto" and problem and _ORDER_ASKED_RE.search(problem):
            changes["tuple_vs_set"] = "differ"
        if self.ordered_tuples and problem and _ANY_ORDER_RE.search(problem):
            changes["ordered_tuples"] = False
        return replace(self, **changes)


RESOURCE_FIELDS = ("timeout_s", "workers")
_ORDER_ASKED_RE = re.compile(
    r"\bordered\s+(?:pair|triple|tuple|quadruple|list|set)s?\b|\bin\s+(?:that\s+|this\s+|the\s+given\s+)?order\b(?!\s+to\b)"
    r"|\bin\s+(?:increasing|decreasing|ascending|descending)\s+order\b|\bin\s+the\s+form\s+\$?\\?\(\s*[a-z]\s*,",
    re.IGNORECASE,
)
_ANY_ORDER_RE = re.compile(r"\bin\s+any\s+order\b|\border\s+(?:does\s+not|doesn't)\s+matter\b", re.IGNORECASE)
