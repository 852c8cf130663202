"""Answer text -> sympy objects, without ``eval``, ``sympify`` or ``parse_expr`` on the text.

LaTeX goes through latex2sympy2_extended (an ANTLR grammar: it builds sympy objects node by node and never
evaluates the text). Plain-text math (``pi/2``, ``sqrt(2)``, ``x**2``) is first rewritten to LaTeX by a
tokenizer that accepts only numbers, operators, brackets, single letters and a fixed list of function and
constant names; anything else raises :class:`ParseError`. Runs inside the killable worker processes only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import sympy
from latex2sympy2_extended import NormalizationConfig, latex2sympy
from latex2sympy2_extended.latex2sympy2 import ConversionConfig

from graders.fast_latex import Unsupported, parse_fast
from graders.normalize import split_top_level
from graders.numbers import Number, parse_number
from graders.screen import check_math


class ParseError(ValueError):
    """The text is not a math expression this grader understands."""


_FUNCS = {
    "sqrt": "\\sqrt", "sin": "\\sin", "cos": "\\cos", "tan": "\\tan", "cot": "\\cot", "sec": "\\sec",
    "csc": "\\csc", "arcsin": "\\arcsin", "arccos": "\\arccos", "arctan": "\\arctan", "asin": "\\arcsin",
    "acos": "\\arccos", "atan": "\\arctan", "sinh": "\\sinh", "cosh": "\\cosh", "tanh": "\\tanh",
    "log": "\\log", "ln": "\\ln", "exp": "\\exp", "abs": "abs",
}  # fmt: skip
_CONSTS = {"pi": "\\pi", "inf": "\\infty", "infty": "\\infty", "infinity": "\\infty", "oo": "\\infty"}
_TOKEN_RE = re.compile(r"\s*(\d+\.\d*|\.\d+|\d+|[A-Za-z]+|\*\*|<=|>=|!=|[-+*/^()\[\],=<>!|{}])")
_OPS = {"*": "\\cdot ", "<=": "\\le ", ">=": "\\ge ", "!=": "\\ne ", "**": "^", "{": "\\{", "}": "\\}"}


def _tokens(s: str) -> list[str]:
    out, pos = [], 0
    while pos < len(s):
        m = _TOKEN_RE.match(s, pos)
        if not m:
            if s[pos:].strip() == "":
                break
            raise ParseError(f"unexpected character {s[pos]!r} in plain-text math")
        out.append(m.group(1))
        pos = m.end()
    return out


def plain_to_latex(s: str) -> str:
    """Rewrite whitelisted plain-text math (``sqrt(2)/2``, ``pi**2``) as LaTeX; raise ParseError otherwise."""
    toks = _tokens(s)
    out: list[str] = []
    closers: list[str] = []  # what each open "(" turns into when closed
    i = 0
    pending_exp = False
    while i < len(toks):
        t = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        if t[0].isalpha():
            low = t.lower()
            if low in _FUNCS and nxt == "(":
                if low == "sqrt":
                    out.append("\\sqrt{")
                    closers.append("}")
                elif low == "abs":
                    out.append("\\left|")
                    closers.append("\\right|")
                else:
                    out.append(_FUNCS[low] + "\\left(")
                    closers.append("\\right)")
                i += 2
                continue
            if low in _CONSTS:
                out.append(_CONSTS[low] + " ")
            elif low in _FUNCS:
                out.append(_FUNCS[low] + " ")
            elif len(t) <= 3:
                out.append(" ".join(t) + " ")  # xy -> x y (a product of single-letter symbols)
            else:
                raise ParseError(f"unknown name {t!r}")
        elif t in ("(", "["):
            out.append(t)
            closers.append("")  # a plain bracket closes as written: (1, 2] is an interval
        elif t in (")", "]"):
            if not closers:
                raise ParseError(f"unbalanced {t!r}")
            out.append(closers.pop() or t)
        elif t in ("^", "**"):
            out.append("^")
            if nxt == "(":  # x^(a+b) -> x^{(a+b)}
                pending_exp = True
            elif nxt in ("-", "+") and i + 2 < len(toks):  # x^-1 -> x^{-1}
                out.append("{" + nxt + toks[i + 2] + "}")
                i += 3
                continue
            elif nxt[:1].isdigit():
                out.append("{" + nxt + "}")
                i += 2
                continue
        else:
            out.append(_OPS.get(t, t))
        if pending_exp and t == "(":
            out[-1] = "{("
            closers[-1] = ")}"
            pending_exp = False
        i += 1
    if closers:
        raise ParseError("unbalanced '('")
    return "".join(out).strip()


@dataclass(frozen=True)
class PlainList:
    """A bare comma list ``1, 2, 3`` (no brackets); ordered or not is a policy of the comparison, except
    for a list in plain braces ``{1, 3}`` (``ordered``): ordered against a tuple, a set against a set."""

    items: tuple
    ordered: bool = False


@dataclass(frozen=True)
class Parsed:
    value: object  # a sympy object or PlainList
    percent: bool = False
    number: Number | None = None  # set when the text is a plain number (keeps its decimal digits)


_NORM = NormalizationConfig(basic_latex=True, units=False, malformed_operators=True, nits=False, boxed="none")
_CONV = ConversionConfig(interpret_simple_eq_as_assignment=False, lowercase_symbols=True)


def _exact_floats(expr):
    """Replace the Floats latex2sympy makes of decimal literals by the exact rationals they denote."""
    try:
        floats = expr.atoms(sympy.Float)
    except (AttributeError, TypeError):
        return expr
    if not floats:
        return expr
    return expr.xreplace({f: sympy.Rational(str(f)) for f in floats})


_CONSTANT_SYMBOLS = {sympy.Symbol("i"): sympy.I, sympy.Symbol("e"): sympy.E}


def _imaginary_unit(expr):
    """The symbols ``i`` and ``e`` are the imaginary unit and Euler's number (``2+3i``, ``e^{i\\pi}``, ``2e``)."""
    try:
        subs = {s: v for s, v in _CONSTANT_SYMBOLS.items() if s in expr.free_symbols}
        return expr.xreplace(subs) if subs else expr
    except (AttributeError, TypeError):
        return expr


_ELLIPSIS = sympy.Symbol("…")
_RATIO_RE = re.compile(r"^(\d{1,12}):(\d{1,12})$")  # an elided run of a written-out sequence: 1, 2, \ldots, n


def _to_sympy(s: str):
    if not s:
        raise ParseError("empty expression")
    if s in ("\\ldots", "\\cdots", "\\dots", "..."):
        return _ELLIPSIS
    m = _RATIO_RE.match(s)
    if m:  # 7:3 is the ratio 7/3; 12:00 (a time) the pair (12, 0)
        a, b = int(m.group(1)), int(m.group(2))
        return sympy.Rational(a, b) if b else sympy.Tuple(sympy.Integer(a), sympy.Integer(b))
    why = check_math(s)
    if why:
        raise ParseError(why)
    if not any(c in s for c in "\\{}_"):  # plain text, not LaTeX
        s = plain_to_latex(s)
    try:
        expr = parse_fast(s)  # the common simple forms, ~100x faster than the ANTLR grammar
    except Unsupported:
        expr = None
    try:
        if expr is None:
            expr = latex2sympy(s, normalization_config=_NORM, conversion_config=_CONV)
    except (ParseError, MemoryError, RecursionError):
        raise
    except Exception as e:  # the ANTLR parser raises bare Exceptions with a caret diagram
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ParseError(f"cannot parse {s[:80]!r}: {first}") from None
    expr = _imaginary_unit(expr)
    if isinstance(expr, sympy.MatrixBase):
        return expr.applyfunc(_exact_floats)
    if isinstance(expr, (sympy.Tuple, sympy.FiniteSet)):
        return type(expr)(*[_exact_floats(a) for a in expr.args])
    return _exact_floats(expr)


@lru_cache(maxsize=4096)
def parse(s: str) -> Parsed:
    """Parse a normalized answer (see :func:`graders.normalize.normalize`) into sympy objects.

    Cached per worker process: the K continuations of a prefix share one gold answer (and often the same
    answer text), so each is parsed once. Parsed values are immutable sympy objects."""
    percent = s.endswith("%")
    body = s[:-1] if percent else s
    number = parse_number(s)
    if number is not None:
        value = sympy.Rational(number.value.numerator, number.value.denominator)
        return Parsed(value, number.percent, number)
    if body.startswith("{") and body.endswith("}") and len(split_top_level(body[1:-1])) > 1:
        inner = split_top_level(body[1:-1])  # {1, 3}: braces group a list (a set is written \{1, 3\})
        return Parsed(PlainList(tuple(_to_sympy(p.strip()) for p in inner), ordered=True), percent)
    parts = split_top_level(body)
    if len(parts) > 1 and "\\pm" not in body:
        return Parsed(PlainList(tuple(_to_sympy(p.strip()) for p in parts)), percent)
    return Parsed(_to_sympy(body), percent)
