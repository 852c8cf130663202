"""A small recursive-descent parser for the LaTeX that most answers are made of (runs in the workers).

latex2sympy2_extended's ANTLR grammar covers all of LaTeX but costs about 5-10 ms per answer in Python;
most answers are simple scalars (``3\\sqrt{2}``, ``\\frac{\\sqrt{3}}{2}``, ``2\\pi``, ``x^2+2x+1``) or
numeric intervals and tuples (``(2, 5]``). This parser builds those as sympy objects node by node, like
the ANTLR parser (no ``eval``, ``sympify`` or ``parse_expr``), in tens of microseconds; anything it does
not know -- functions, subscripts, sets, relations, matrices, a letter before ``(`` (``f(x)`` or ``x(x+1)``)
-- raises :class:`Unsupported` and the caller falls back to latex2sympy. Results follow latex2sympy's
conventions: symbols are lowercase letters without assumptions, decimals are exact rationals, ``(a, b)``
with numeric ``a < b`` is an open interval and a tuple otherwise.
"""

from __future__ import annotations

import re

import sympy


class Unsupported(ValueError):
    """Not in the subset this parser handles: use the full parser."""


_TOKEN_RE = re.compile(
    r"\s*(\d+\.\d*|\.\d+|\d+|\\[a-zA-Z]+|\\[{}]|[a-zA-Z]|[-+*/^(){}\[\],!])", re.ASCII
)
_MAX_TOKENS = 200


def _tokens(s: str) -> list[str]:
    out, pos = [], 0
    while pos < len(s):
        m = _TOKEN_RE.match(s, pos)
        if not m:
            if not s[pos:].strip():
                break
            raise Unsupported(s[pos])
        out.append(m.group(1))
        pos = m.end()
        if len(out) > _MAX_TOKENS:
            raise Unsupported("long")
    return out


_CONSTS = {"\\pi": sympy.pi, "\\infty": sympy.oo}
_MUL_OPS = {"*", "\\cdot", "\\times"}
_DIV_OPS = {"/", "\\div"}


class _Parser:
    def __init__(self, toks: list[str]):
        self.t = toks
        self.i = 0

    def peek(self) -> str | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise Unsupported(f"expected {want}")
        self.i += 1
        return tok

    def expr(self):
        if self.peek() in ("-", "+"):
            sign = self.take()
            value = self.term()
            value = -value if sign == "-" else value
        else:
            value = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self):
        value = self.factor()
        while True:
            tok = self.peek()
            if tok in _MUL_OPS:
                self.take()
                value = value * self.factor()
            elif tok in _DIV_OPS:
                self.take()
                value = value / self.factor()
            elif tok is not None and self._starts_factor(tok):
                value = value * self.factor()  # implicit multiplication: 2x, 2\sqrt{3}, 3(x+1)
            else:
                return value

    @staticmethod
    def _starts_factor(tok: str) -> bool:
        return tok[0].isdigit() or tok[0] == "." or tok.isalpha() or tok in ("(", "{") or (
            tok in _CONSTS or tok in ("\\frac", "\\sqrt")
        )

    def factor(self):
        if self.peek() == "-":
            self.take()
            return -self.factor()
        base = self.atom()
        while self.peek() == "!":
            self.take()
            if not (base.is_Integer and 0 <= base <= 1000):
                raise Unsupported("factorial")
            base = sympy.factorial(base)
        if self.peek() == "^":
            self.take()
            expo = self.group() if self.peek() == "{" else self.atom(exponent=True)
            if expo.is_Number and (abs(expo) > 1000 or _digits(base) * abs(expo) > 5000):
                raise Unsupported("large power")  # never build a huge integer here
            base = sympy.Pow(base, expo)
        return base

    def group(self):
        self.take("{")
        value = self.expr()
        self.take("}")
        return value

    def arg(self):
        """A command argument: ``{...}`` or a single digit or letter (``\\frac12``, ``\\sqrt2``)."""
        tok = self.peek()
        if tok == "{":
            return self.group()
        if tok is None:
            raise Unsupported("missing argument")
        self.take()
        if tok[0].isdigit():
            if len(tok) > 1:  # \frac123 = \frac{1}{2}3: put the rest back
                self.t[self.i - 1 : self.i] = [tok[0], tok[1:]]
            return sympy.Integer(int(tok[0]))
        if len(tok) == 1 and tok.isalpha():
            return sympy.Symbol(tok.lower())
        raise Unsupported("argument")

    def atom(self, exponent: bool = False):
        tok = self.peek()
        if tok is None:
            raise Unsupported("end")
        if tok[0].isdigit() or tok[0] == ".":
            self.take()
            return sympy.Rational(tok) if ("." in tok) else sympy.Integer(int(tok))
        if len(tok) == 1 and tok.isalpha():
            self.take()
            if self.peek() == "(":
                raise Unsupported("letter before a bracket")  # f(x) or x(x+1): the full parser decides
            return sympy.Symbol(tok.lower())
        if tok in _CONSTS:
            self.take()
            return _CONSTS[tok]
        if tok == "\\frac":
            self.take()
            num = self.arg()
            den = self.arg()
            return num / den
        if tok == "\\sqrt":
            self.take()
            if self.peek() == "[":
                self.take()
                n = self.expr()
                self.take("]")
                return sympy.root(self.arg(), n)
            return sympy.sqrt(self.arg())
        if tok == "(" and not exponent:
            self.take()
            value = self.expr()
            self.take(")")
            return value
        if tok == "{":
            return self.group()
        raise Unsupported(tok)


def _digits(x) -> float:
    """Decimal digits of a rational's numerator and denominator (0 for anything else)."""
    if isinstance(x, sympy.Rational):
        return float(len(str(abs(x.p))) + len(str(x.q)))
    return 0.0


def _interval_or_tuple(toks: list[str]):
    """``(a, b]``-style brackets around top-level comma-separated scalars, else None."""
    if len(toks) < 5 or toks[0] not in "([" or toks[-1] not in ")]":
        return None
    depth, cuts = 0, []
    for j, tok in enumerate(toks[1:-1], start=1):
        if tok in ("(", "[", "{"):
            depth += 1
        elif tok in (")", "]", "}"):
            depth -= 1
            if depth < 0:
                return None
        elif tok == "," and depth == 0:
            cuts.append(j)
    if not cuts or depth != 0:
        return None
    bounds = [1, *[c + 1 for c in cuts]]
    ends = [*cuts, len(toks) - 1]
    items = [_scalar(toks[a:b]) for a, b in zip(bounds, ends)]
    if len(items) == 2:
        left, right = items
        if not (left.is_extended_real and right.is_extended_real and left.is_number and right.is_number):
            raise Unsupported("symbolic interval")
        if bool(left < right):
            return sympy.Interval(left, right, toks[0] == "(", toks[-1] == ")")
        if toks[0] == "(" and toks[-1] == ")":
            return sympy.Tuple(*items)
        raise Unsupported("reversed interval")
    if toks[0] == "(" and toks[-1] == ")":
        return sympy.Tuple(*items)
    raise Unsupported("bracket list")


def _scalar(toks: list[str]):
    p = _Parser(toks)
    value = p.expr()
    if p.i != len(toks):
        raise Unsupported("trailing tokens")
    return value


def parse_fast(s: str):
    """A sympy object for ``s`` when it is in the supported subset, else raise :class:`Unsupported`."""
    toks = _tokens(s)
    if not toks:
        raise Unsupported("empty")
    if "," in toks:
        value = _interval_or_tuple(toks)
        if value is None:
            raise Unsupported("list")
        return value
    return _scalar(toks)
