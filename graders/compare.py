"""The in-process comparison rules, cheapest first; what they cannot decide goes to the sympy workers.

1. refuse answers that could explode (:func:`graders.screen.prescreen`) -> None;
2. normalized strings equal -> True;
3. both plain numbers -> exact rational comparison (``0.5`` = ``\\frac12`` = ``1/2``; percent policy;
   a decimal may round a non-terminating rational, ``0.333`` = ``\\frac13``);
4. words (``Monday``, ``yes``) -> case-insensitive text comparison;
5. strings that cannot be math (code, quotes, unknown names) -> None, never parsed.

Everything else returns None from :func:`compare_fast` and is decided by
:func:`graders.symbolic.sympy_verdict` in a worker process.
"""

from __future__ import annotations

import re
from fractions import Fraction

from graders.config import GraderConfig
from graders.normalize import split_top_level
from graders.numbers import Number, approx_equal, parse_number, word_number
from graders.screen import check_math, is_text_answer, lenient, prescreen

Result = tuple[bool | None, str]
LENIENT_TAG = " (read leniently)"


def _decimal_readings(n: Number, policy: str) -> list[Number]:
    """``n`` as the decimals it may stand for: ``33.3%`` is 33.3 and/or 0.333 (two more decimal places)."""
    if not n.percent:
        return [n]
    out = []
    for v in n.candidates(policy):
        digits = n.frac_digits if v == n.value or n.frac_digits is None else n.frac_digits + 2
        out.append(Number(v, False, digits, n.sig_digits))
    return out


_TEXT_LEAD_RE = re.compile(r"^(?:(?:the|a|an|on|in|at|it\s+is|it's)\s+)+")


def _text_key(s: str) -> str:
    """Words compared without case, a leading article or preposition (``on Tuesday``), and with "neither
    even nor odd" as "neither"."""
    t = _TEXT_LEAD_RE.sub("", " ".join(s.casefold().replace("-", " ").split()))
    return "neither" if t == "neither even nor odd" else t


def compare_numbers(gold: Number, answer: Number, config: GraderConfig) -> Result:
    """Exact comparison of two plain numbers under the percent and rounded-decimal policies."""
    for g in gold.candidates(config.percent):
        for a in answer.candidates(config.percent):
            if g == a:
                return True, "numeric: exact" + (" (percent)" if gold.percent or answer.percent else "")
    k = config.approx_min_sig_digits
    for g in _decimal_readings(gold, config.percent):
        for a in _decimal_readings(answer, config.percent):
            if approx_equal(a, g.value, k) or approx_equal(g, a.value, k):
                return True, "numeric: rounded decimal" + (" (percent)" if gold.percent or answer.percent else "")
    return False, "numeric: different values"


# "4, 316, 588": integers grouped by commas. It is the number 4316588 when the other answer was itself written
# with thousands separators (gold 4,316,588); otherwise a list ("32, 349" is not 32349). Same rule both ways.
_GROUPED_RE = re.compile(r"^(-?)(\d{1,3}(?:, ?\d{3})+)$", re.ASCII)
_THOUSANDS_WRITTEN_RE = re.compile(r"\d(?:,|\{,\}|,\\!\s?|\\,|,\\,)\d{3}(?!\d)", re.ASCII)


def thousands_written(raw: str) -> bool:
    """``raw`` (before normalization) writes a number with thousands separators: ``4,316,588``, ``12,\\!345``."""
    return bool(_THOUSANDS_WRITTEN_RE.search(raw))
_RELATION_RE = re.compile(r"\\(?:le|ge|ne|lt|gt|leq|geq|neq|equiv|in)(?![a-zA-Z])|[<>]|!=")
_FUNC_DEF_RE = re.compile(r"^[a-zA-Z](?:_\{?\w+\}?)?\(\s*[a-zA-Z]\s*\)=", re.ASCII)


_RATIO_RE = re.compile(r"^(\d+):(\d+)$", re.ASCII)
_COLON_RE = re.compile(r"^\d+(?::\d+)+(?::\\(?:ldots|cdots|dots))?$", re.ASCII)


def _ratio(s: str) -> Number | None:
    m = _RATIO_RE.match(s)
    return Number(Fraction(int(m.group(1)), int(m.group(2)))) if m and int(m.group(2)) else None


def grouped_number(s: str) -> Number | None:
    """``4, 316, 588`` (comma-grouped digits, optional spaces) as the number 4316588, else None."""
    m = _GROUPED_RE.match(s)
    if not m:
        return None
    return Number(Fraction(int(m.group(1) + m.group(2).replace(",", "").replace(" ", ""))))


_VARIABLE_RE = re.compile(
    r"^(?:[a-zA-Z](?:_\{?\w+\}?)?'*|\\[a-zA-Z]+(?:_\{?\w+\}?)?|[a-zA-Z]\([a-zA-Z]\)|\([a-zA-Z](?:_\{?\w+\}?)?(?:, ?[a-zA-Z](?:_\{?\w+\}?)?)+\))$",
    re.ASCII,
)
# AB, |AB|, S_{ABC}:S, \frac{NO}{BO}: a named quantity (no sums, no numbers) whose value the gold states
_NAMED_QUANTITY_RE = re.compile(r"^[^+\-\d=]*[A-Za-z][^+\-\d=]*$", re.ASCII)
_SUBSCRIPT_RE = re.compile(r"_\{[^{}]*\}|_\w")
_FREE_LETTER_RE = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]")


def _is_value(s: str) -> bool:
    """No free variable letters (LaTeX commands such as ``\\frac``, ``\\sqrt``, ``\\pi`` allowed)."""
    return not _FREE_LETTER_RE.search(re.sub(r"\\[a-zA-Z]+", "", s))


_APPROX_RE = re.compile(r"\\approx.*$|\\sim.*$")


def _sides(item: str) -> list[str]:
    return [p.strip() for p in split_top_level(_APPROX_RE.sub("", item), "=")]


def _value_side(s: str, gold: bool) -> str | None:
    """The value of ``lhs = value`` (the last side of a chain ``x = 2 + 3 = 5``); for a list of such
    equations, the list of values. None when ``s`` is not of that form. A gold answer's left side must be
    a variable (``x``, ``x_1``, ``f(x)``, ``(a, b)``): ``a + 3z = 0`` is an equation, not the value 0. A
    function ``f(x) = ...`` is left to the symbolic grader, which renames its variable."""
    out = []
    for n, item in enumerate(split_top_level(s, ",")):
        sides = _sides(item.strip())
        if n > 0 and len(sides) == 1 and sides[0]:
            out.append(sides[0])  # "(x, y) = (5, 8), (8, 5)": later items may be bare values
            continue
        if len(sides) < 2 or not sides[0] or not sides[-1] or _FUNC_DEF_RE.match(item.strip()):
            return None
        first, last = sides[0], sides[-1]
        if len(last) == 1 and last.isalpha() and not first.isalpha():
            out.append(first)  # "3 = x"
        elif gold and not (
            _VARIABLE_RE.match(first) or _NAMED_QUANTITY_RE.match(_SUBSCRIPT_RE.sub("", first)) and _is_value(last)
        ):
            return None
        else:
            out.append(last)
    return ", ".join(out)


_NAMED_VALUES_RE = re.compile(r"^[a-zA-Z]\s*=[^=,]+(?:,\s*[a-zA-Z]\s*=[^=,]+)+$")


def relation_values(gold: str, answer: str) -> tuple[str, str]:
    """Compare equations by their values where that is what is asked.

    Exactly one side an equation (the other has no relation at all): ``x = 3`` vs ``3``,
    ``(a,b)=(5,2)`` vs ``(5,2)``, an answer ``2 + 1 = 3`` vs ``3``. Both equations of the same variable
    (``x = 5 + 6 = 11`` vs ``x = 11``): their last values.
    """
    g_eq, a_eq = "=" in gold, "=" in answer
    if not (g_eq or a_eq) or _RELATION_RE.search(gold) or _RELATION_RE.search(answer):
        return gold, answer
    if g_eq and a_eq:
        gs, as_ = _sides(gold), _sides(answer)
        if (
            len(gs) >= 2 and len(as_) >= 2 and gs[0] == as_[0] and _VARIABLE_RE.match(gs[0])
            and "," not in gold and "," not in answer and (len(gs) > 2 or len(as_) > 2)
        ):  # fmt: skip
            return gs[-1], as_[-1]
        return gold, answer
    value = _value_side(gold if g_eq else answer, gold=g_eq)
    if value is None:
        return gold, answer
    if not g_eq and gold[:1] in "([" and _NAMED_VALUES_RE.match(answer):
        value = f"({value})"  # x = 2, y = 3 against the pair (2, 3): the values in the order written
    return (value, answer) if g_eq else (gold, value)


_CHOICE_VALUE_RE = re.compile(r"^\(([A-E])\)\s*(\S.*)$|^([A-E])[.:)]\s*(\S.*)$", re.ASCII)


def split_choice(gold: str, answer: str) -> tuple[str | None, str]:
    """``(B) 7``: a multiple-choice letter written with its value. Against a letter gold, ``(letter, "")``;
    against any other gold, ``(None, value)``; ``(None, answer)`` when ``answer`` is not of that form."""
    m = _CHOICE_VALUE_RE.match(answer)
    if not m:
        return None, answer
    letter, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    g = gold.strip("()")
    if len(g) == 1 and g.isalpha():
        return letter, ""
    return None, value


def compare_fast(gold: str, answer: str, config: GraderConfig, grouped: bool = False) -> Result | None:
    """Verdict for two *normalized* answers when cheap rules decide it, else None (needs sympy)."""
    if not answer:
        return None, "empty answer"
    why = prescreen(answer, config.max_answer_chars)
    if why:
        return None, why
    if gold == answer:
        return True, "string match"
    if not gold:
        return None, "empty gold answer"
    why = prescreen(gold, config.max_answer_chars)
    if why:
        return None, f"gold {why}"
    if config.equation_lhs_symbol:
        gold, answer = relation_values(gold, answer)
        if gold == answer:
            return True, "string match (value of an equation)"
    g_num, a_num = parse_number(gold), parse_number(answer)
    if g_num is not None and a_num is not None:
        return compare_numbers(g_num, a_num, config)
    g_col, a_col = _COLON_RE.match(gold), _COLON_RE.match(answer)
    if g_col and a_col:  # 12:00 vs 1:00, 1:2:3:\ldots vs 1:4:9:\ldots; two-part ratios by their quotient
        g_r, a_r = _ratio(gold), _ratio(answer)
        if g_r is not None and a_r is not None:
            return compare_numbers(g_r, a_r, config)
        same = [int(x) for x in gold.split(":") if x.isdigit()] == [int(x) for x in answer.split(":") if x.isdigit()]
        same = same and gold.endswith("\\ldots") == answer.endswith("\\ldots")
        return same, "colon-separated numbers" if same else "colon-separated numbers differ"
    if (g_num is None) != (a_num is None):  # 7:3 against 7/3: a ratio is the quotient
        g_num = g_num or _ratio(gold)
        a_num = a_num or _ratio(answer)
        if g_num is not None and a_num is not None:
            return compare_numbers(g_num, a_num, config)
    if grouped and (g_num is not None or a_num is not None):
        g_grp = g_num or grouped_number(gold)
        a_grp = a_num or grouped_number(answer)
        if g_grp is not None and a_grp is not None:
            return compare_numbers(g_grp, a_grp, config)
    g_text, a_text = is_text_answer(gold), is_text_answer(answer)
    if g_text != a_text:  # "six" against 6: a number written in words
        w = word_number(answer if a_text else gold)
        other = g_num if a_text else a_num
        if w is not None and other is not None:
            wn = Number(w)
            return compare_numbers(other, wn, config) if a_text else compare_numbers(wn, other, config)
    letter, value = split_choice(gold, answer)
    if letter is not None:
        same = gold.strip("()").upper() == letter
        return same, "choice letter" if same else "choice letter: different"
    if value != answer:
        return compare_fast(gold, value, config, grouped)
    if g_text or a_text:
        if g_text and a_text:
            same = _text_key(gold) == _text_key(answer)
            return same, "text" if same else "text: different words"
        return False, "text vs math"
    if len(gold) == 1 and len(answer) == 1 and gold.isalpha() and answer.isalpha():
        return gold.casefold() == answer.casefold(), "single letter"
    why = check_math(answer)
    if why:
        loose = lenient(answer)
        if loose is None:
            return None, f"answer unparseable: {why}"
        res = compare_fast(gold, loose, config, grouped)
        if res is None:
            return None  # the worker reads it leniently too
        return res[0], res[1] + LENIENT_TAG if res[0] is not None else res[1]
    why = check_math(gold)
    if why:
        return None, f"gold unparseable: {why}"
    return None
