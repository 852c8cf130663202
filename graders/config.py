"""Every policy knob of the graders in one frozen (hashable) dataclass."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal


@dataclass(frozen=True)
class GraderConfig:
    """Policies of the answer graders. Defaults follow Math-Verify / NeMo-Skills where the field agrees.

    Resources
        timeout_s: hard wall-clock limit per verdict that needs sympy (the worker is killed and replaced;
            the verdict is ``None`` with reason ``"timeout"``). Fast-path verdicts never need it.
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
        interval_vs_inequality: ``1 < x \\le 2`` equals ``(1, 2]`` (default True).
        equation_lhs_symbol: ``x = 3`` equals ``3`` when the left side is a single symbol (default True).

    Symbolic
        symbolic: ``"simplify"`` (default): two expressions are equal when their difference simplifies to 0,
            so ``\\frac{x^2-1}{x-1}`` = ``x+1`` (they agree wherever both are defined); ``"expand"``: only
            when the expanded difference is 0 (no cancellation of common factors).
    """

    timeout_s: float = 2.0
    workers: int = 0
    max_answer_chars: int = 1000
    last_number_fallback: bool = True
    rel_tol: float = 1e-9
    approx_min_sig_digits: int = 3
    percent: Literal["both", "number", "fraction"] = "both"
    ordered_tuples: bool = True
    comma_list: Literal["unordered", "ordered"] = "unordered"
    interval_vs_inequality: bool = True
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
        if self.symbolic not in ("simplify", "expand"):
            raise ValueError(f"GraderConfig.symbolic must be 'simplify' or 'expand', got {self.symbolic!r}")

    def as_dict(self) -> dict:
        return asdict(self)
