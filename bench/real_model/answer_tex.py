"""Answers written the way MATH / GSM8K write them (TeX fractions, decimals, money, radicals, linear terms,
polynomials, factors): the gold answers of :mod:`problems`."""

from __future__ import annotations

from fractions import Fraction


def frac_tex(q: Fraction) -> str:
    q = Fraction(q)
    if q.denominator == 1:
        return str(q.numerator)
    s = "-" if q < 0 else ""
    return f"{s}\\frac{{{abs(q.numerator)}}}{{{q.denominator}}}"


def frac_dec(q: Fraction) -> str:
    """A terminating fraction as a decimal (24.8), else LaTeX."""
    d = q.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d != 1:
        return frac_tex(q)
    s = f"{float(q):.10f}".rstrip("0").rstrip(".")
    return s


def money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


def simplify_sqrt(n: int) -> tuple[int, int]:
    """sqrt(n) = a*sqrt(b), b square-free."""
    a, b = 1, n
    f = 2
    while f * f <= b:
        while b % (f * f) == 0:
            b //= f * f
            a *= f
        f += 1
    return a, b


def rad_tex(a: int, b: int) -> str:
    if b == 1:
        return str(a)
    return f"\\sqrt{{{b}}}" if a == 1 else f"{a}\\sqrt{{{b}}}"


def lin_tex(a: int, b: int, var: str = "x") -> str:
    """a*x + b as LaTeX."""
    t = "" if a == 1 else "-" if a == -1 else str(a)
    out = f"{t}{var}" if a else ""
    if b:
        out += (f" + {b}" if b > 0 else f" - {-b}") if out else str(b)
    return out or "0"


def poly_tex(coeffs: list[int], var: str = "x") -> str:
    """coeffs highest degree first."""
    deg = len(coeffs) - 1
    parts = []
    for i, c in enumerate(coeffs):
        p = deg - i
        if c == 0:
            continue
        mag = abs(c)
        if p == 0:
            body = str(mag)
        else:
            body = ("" if mag == 1 else str(mag)) + var + (f"^{p}" if p > 1 else "")
        if not parts:
            parts.append(("-" if c < 0 else "") + body)
        else:
            parts.append((" - " if c < 0 else " + ") + body)
    return "".join(parts) or "0"


def factor_tex(r: int) -> str:
    """(x - r)."""
    return f"(x - {r})" if r > 0 else f"(x + {-r})" if r < 0 else "x"


# ---------------------------------------------------------------- families
