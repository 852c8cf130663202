"""Answer grading: is the final answer of a model response equal to the gold answer?

>>> from graders import grade
>>> grade(r"\\frac{1}{2}", r"so the answer is \\boxed{0.5}")
Verdict(correct=True, reason='numeric: exact', extracted='0.5')

Pipeline (separate modules): :mod:`graders.extract` finds the answer in the response (last ``\\boxed{}``,
``####``, "The answer is", "Final answer:", then -- only for numeric golds -- the last number);
:mod:`graders.normalize` maps equivalent spellings to one string; :mod:`graders.compare` decides in-process
what is cheap (string match, exact rational arithmetic with :mod:`fractions` for plain numbers, words);
:mod:`graders.symbolic` decides the rest with sympy inside :mod:`graders.pool`'s killable worker processes.
Verdicts are ``True``/``False``/``None`` with a ``reason`` and a ``kind`` (:mod:`graders.verdict`): a readable
answer that is not the gold is False, a response without an answer is False (``no_answer``), and None is
kept for what cannot be read or decided (``unreadable``, ``rejected``, ``gold``, ``timeout``, ``crash``).
They are cached by (normalized gold, normalized answer, config) in the parent process. The problem text
is optional (``problems=`` or triples) and decides wording policies (an "ordered pair" vs a set).

Policies (all in :class:`GraderConfig`; defaults after Math-Verify / NeMo-Skills): ``50\\%`` equals ``50``
and ``0.5``; tuples ordered, sets and bare comma lists unordered, a tuple equals the set of its values unless
the problem asks for order; interval bracket types matter and
``1 < x \\le 2`` equals ``(1, 2]``; ``x = 3`` equals ``3`` (single-symbol left side); ``1 \\pm \\sqrt2`` is the
set of both values; ``30^\\circ`` equals ``30`` and ``\\frac{\\pi}{6}``; ``\\text{}`` units and ``$`` are dropped; ``i`` is the
imaginary unit; ``\\frac{x^2-1}{x-1}`` equals ``x+1`` (simplify: they agree wherever both are defined);
a decimal may round or truncate a non-terminating value (``0.333`` = ``\\frac13``, ``3.14`` = ``\\pi``).

Safety: model text is never given to ``eval``, ``sympify`` or ``parse_expr``. LaTeX is parsed by
latex2sympy2_extended's ANTLR grammar; plain-text math (``pi/2``, ``sqrt(2)``) is rewritten to LaTeX by a
whitelist tokenizer (numbers, operators, brackets, single letters, known function names) -- we chose this
over ``parse_expr`` behind a whitelist because no Python evaluation happens at all. Before parsing,
answers with code-like content (quotes, ``__``, unknown long names) are refused, and inputs that could
explode (megabyte strings, deep nesting, power towers, huge exponents/factorials) are pre-screened. Every
sympy comparison runs in a worker process with a CPU-time budget (``GraderConfig.timeout_s``, 2 s, retried
once with 3x), a generous wall-clock cap and a memory limit; a hung worker is killed and replaced.
Verdict kinds, formats and policies: docs/grading.md.

Importing this package imports neither sympy nor torch; the workers import sympy.
"""

from __future__ import annotations

from collections.abc import Sequence

from graders.config import GraderConfig
from graders.extract import extract_answer
from graders.normalize import normalize
from graders.registry import (
    CACHE,
    Grader,
    _check_pair,
    available_graders,
    check_golds,
    get_grader,
    grader_identity,
    reads_problems,
    register_grader,
    with_problems,
)
from graders.registry import SYMPY_GRADER_VERSION as GRADER_VERSION
from graders.verdict import Verdict

__all__ = [
    "GRADER_VERSION",
    "CACHE",
    "Grader",
    "GraderConfig",
    "Verdict",
    "available_graders",
    "check_golds",
    "extract_answer",
    "get_grader",
    "grade",
    "grade_batch",
    "grader_identity",
    "normalize",
    "reads_problems",
    "register_grader",
    "shutdown",
]


def grade(
    gold: str, response: str, config: GraderConfig | None = None, grader: str = "sympy", problem: str | None = None
) -> Verdict:
    """The verdict for one (gold answer, model response) pair; ``problem`` (optional) decides wording policies."""
    return grade_batch([(gold, response)], config, grader, problems=[problem])[0]


def grade_batch(
    pairs: Sequence[tuple],
    config: GraderConfig | None = None,
    grader: str = "sympy",
    problems: Sequence[str | None] | None = None,
) -> list[Verdict]:
    """Verdicts for many (gold, response) pairs, in the same order; sympy work runs in parallel workers.

    The problem text of each pair is optional: give ``problems`` (one per pair, None allowed) or pass
    (gold, response, problem) triples. It decides the ``"auto"`` policies of :class:`GraderConfig` (an
    "ordered pair" keeps a tuple apart from a set). A grader not registered with ``reads_problems=True`` gets
    plain pairs.
    """
    g = get_grader(grader)
    config = config or GraderConfig()
    if reads_problems(grader):
        return g.grade_batch(with_problems(pairs, problems), config)
    if problems is not None and len(problems) != len(pairs):
        raise ValueError(f"problems: expected one per pair ({len(pairs)}), got {len(problems)}")
    return g.grade_batch([_check_pair(i, p) for i, p in enumerate(pairs)], config)


def shutdown() -> None:
    """Stop the sympy worker processes now (they also stop at interpreter exit)."""
    from graders.pool import shutdown_pool

    shutdown_pool()
