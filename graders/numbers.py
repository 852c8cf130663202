"""Exact parsing of plain numbers with :class:`fractions.Fraction` (the in-process fast path, no sympy).

Accepted forms (after :func:`graders.normalize.normalize`): ``-5``, ``2.5``, ``.5``, ``7/3``, ``-7/3``,
``\\frac{7}{3}``, ``-\\frac{7}{3}``, ``\\frac{-7}{3}``, ``1.5e3`` and any of these followed by ``%``.
Anything else returns None and goes to the symbolic grader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

_INT = r"[-+]?\d+"
_DEC = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d{1,3})?"
_PLAIN_RE = re.compile(rf"^({_DEC})$")
_SLASH_RE = re.compile(rf"^({_INT})/(\d+)$")
_FRAC_RE = re.compile(rf"^(-?)\\frac\{{({_INT})\}}\{{({_INT})\}}$")


@dataclass(frozen=True)
class Number:
    """An exactly parsed number. ``frac_digits``/``sig_digits`` are set when it was written as a decimal."""

    value: Fraction
    percent: bool = False
    frac_digits: int | None = None
    sig_digits: int = 0

    def candidates(self, percent_policy: str) -> tuple[Fraction, ...]:
        """Values this number may stand for under the percent policy (``50%`` -> 50 and/or 1/2)."""
        if not self.percent:
            return (self.value,)
        if percent_policy == "number":
            return (self.value,)
        if percent_policy == "fraction":
            return (self.value / 100,)
        return (self.value, self.value / 100)


def _decimal_info(text: str) -> tuple[int | None, int]:
    mantissa, _, exponent = text.lstrip("+-").lower().partition("e")
    if "." not in mantissa:
        return None, 0
    int_part, frac_part = mantissa.split(".")
    digits = (int_part + frac_part).lstrip("0")
    return len(frac_part) - int(exponent or 0), len(digits)


@lru_cache(maxsize=1 << 16)
def parse_number(s: str) -> Number | None:
    """The exact value of a plain-number string, or None when it is not one."""
    if not s or len(s) > 64:
        return None
    percent = s.endswith("%")
    if percent:
        s = s[:-1]
    m = _PLAIN_RE.match(s)
    if m:
        frac_digits, sig = _decimal_info(s)
        return Number(Fraction(s), percent, frac_digits, sig)
    m = _SLASH_RE.match(s)
    if m:
        den = int(m.group(2))
        return Number(Fraction(int(m.group(1)), den), percent) if den else None
    m = _FRAC_RE.match(s)
    if m:
        den = int(m.group(3))
        if not den:
            return None
        value = Fraction(int(m.group(2)), den)
        return Number(-value if m.group(1) else value, percent)
    return None


def terminates(q: Fraction) -> bool:
    """True when ``q`` has a finite decimal expansion (its denominator has no prime factor but 2 and 5)."""
    d = q.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def approx_equal(decimal: Number, other: Fraction, min_sig_digits: int) -> bool:
    """``decimal`` (``d`` fractional digits) is ``other`` rounded or truncated to ``d`` digits, and ``other``
    does not terminate (``0.333``/``0.3333`` for 1/3; ``0.667``/``0.666`` for 2/3; never ``0.334``)."""
    if min_sig_digits <= 0 or decimal.frac_digits is None or decimal.sig_digits < min_sig_digits:
        return False
    if terminates(other):
        return False
    ulp = Fraction(10) ** -decimal.frac_digits
    diff = other - decimal.value
    if abs(diff) <= ulp / 2:  # rounded
        return True
    return 0 <= (diff if other > 0 else -diff) < ulp  # truncated toward zero


_UNITS = {
    w: i for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6}


_DENOMINATORS = {
    "half": 2, "halves": 2, "third": 3, "thirds": 3, "fourth": 4, "fourths": 4, "quarter": 4, "quarters": 4,
    "fifth": 5, "fifths": 5, "sixth": 6, "sixths": 6, "seventh": 7, "sevenths": 7, "eighth": 8, "eighths": 8,
    "ninth": 9, "ninths": 9, "tenth": 10, "tenths": 10,
}  # fmt: skip


def word_number(s: str) -> Fraction | None:
    """A number written in English words (``six``, ``twenty-four``, ``one hundred and five``, ``two thirds``,
    ``one-quarter``, ``a half``), else None."""
    words = s.casefold().replace("-", " ").split()
    if len(words) >= 2 and words[-1] in _DENOMINATORS:
        num = 1 if words[:-1] == ["a"] else word_number(" ".join(words[:-1]))
        return None if num is None else Fraction(num) / _DENOMINATORS[words[-1]]
    n = _word_integer(words)
    return None if n is None else Fraction(n)


def _word_integer(words: list[str]) -> int | None:
    if not words or len(words) > 8:
        return None
    total = current = 0
    seen = False
    for w in words:
        if w == "and" and seen:
            continue
        if w in _UNITS:
            current += _UNITS[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w in _SCALES:
            if w == "hundred":
                current = (current or 1) * 100
            else:
                total += (current or 1) * _SCALES[w]
                current = 0
        else:
            return None
        seen = True
    return total + current
