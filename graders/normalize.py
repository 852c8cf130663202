"""String normalization of answers (the cheap checks run before any parsing are :mod:`graders.screen`).

``normalize`` maps the many ways of writing one answer to one string (the cache key and the string-match
rule): it drops ``$``/``\\(...\\)`` delimiters, ``\\left``/``\\right``, spacing commands, ``\\text{}`` units,
dollar signs and degree marks; turns ``\\dfrac``/``\\tfrac`` into ``\\frac`` and ``\\%`` into ``%``; removes
thousands separators (``1,000``, ``1{,}000``, ``1\\,000``) and a trailing full stop.

:func:`split_top_level` splits at separators outside brackets; :data:`KNOWN_NAMES` are the names a math answer
may contain outside a LaTeX command.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Names that may appear outside a LaTeX command in a math answer.
KNOWN_NAMES = frozenset(
    "sqrt sin cos tan cot sec csc arcsin arccos arctan asin acos atan sinh cosh tanh log ln exp abs pi "
    "inf infty infinity oo mod gcd lcm max min det".split()
)

_DELIMS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_SPACING_RE = re.compile(r"(?<!\\)\\[,;:! ]|\\quad|\\qquad|~|\\displaystyle|\\textstyle|\\mathstrut")
_LEFTRIGHT_RE = re.compile(r"\\(?:left|right|big|Big|bigg|Bigg)[lrm]?(?![a-zA-Z])\s*\.?")
_THIN_THOUSANDS_RE = re.compile(r"(?<=\d)(?:\{,\}|,?\\[,! ]|,\{\})\s?(?=\d{3}(?!\d))", re.ASCII)
# a number grouped by commas, "1,234,567": the look-behind keeps the scan linear (no restart inside a chain)
# (never right after an opening bracket: "(12,102)" is a pair)
_THOUSANDS_RE = re.compile(r"(?<![\d.,(\[{])([1-9]\d{0,2}(?:,\d{3})+)(?![\d,])(\.\d+)?", re.ASCII)
_MATH_LETTER_RE = re.compile(r"\\(?:mathrm|mathit|operatorname)\s*\{([a-zA-Z])\}")  # \mathrm{e}: the letter
_DEGREE_RE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ|°|\^\s*\{?\s*\\degree\s*\}?|\\degree|\\textdegree")
_TEXT_RE = re.compile(r"\\(?:text|textbf|textit|textrm|mbox|mathrm|mathit|operatorname)\s*\{([^{}]*)\}")
_UNIT_RE = re.compile(_TEXT_RE.pattern + r"(?:\^\s*\{?\s*[23]\s*\}?)?")  # \text{ cm}^2
_UNWRAP_RE = re.compile(
    r"\\(?:mathbf|boldsymbol|bm|mathsf|mathnormal|textnormal|underline|overline)\s*\{([^{}]*)\}"
)
_FRAC_DIGITS_RE = re.compile(r"\\frac\s*(\d)\s*(\d)")
_FRAC_HALF_RE = re.compile(r"\\frac\s*(\d)\s*(?=\{)")
_FRAC_TAIL_RE = re.compile(r"(\\frac\s*\{[^{}]*\})\s*(\d)")
_SQRT_PAREN_RE = re.compile(r"\\sqrt\s*\(([^()]{1,40})\)")
_SQRT_RE = re.compile(r"\\sqrt\s*(\[[^\[\]{}]{1,10}\])?\s*(\d+|[a-zA-Z](?![a-zA-Z]))")
_OP_SPACE_RE = re.compile(r"\s*([-+*/=<>,()\[\]{}^_|!&:])\s*")
# 1,000.99m^{2}, 2.5cm, 12kg: a number with a unit glued to it (a known unit only: "5m" alone stays 5m)
_GLUED_UNIT_RE = re.compile(
    r"^(-?\d[\d,]*(?:\.\d+)?)(?:cm|mm|km|m|kg|mg|g|ml|mL|L|s|ms|min|h|hr|hrs|ft|in|yd|mi|lb|lbs|oz|mph)"
    r"(?:\^\{?[23]\}?)?$",
    re.ASCII,
)
_NUMBER_WORDS_RE = re.compile(r"^(-?\d+(?:\.\d+)?%?)\s+([a-zA-Z]{2}[a-zA-Z.\s]*)$", re.ASCII)
_CHOICE_RE = re.compile(r"^\(?([A-Ea-e])\)?$|^\(?([A-E])(?:\)|\.|:)\s.{1,200}$")
_CONJ_RE = re.compile(r"\\text\s*\{\s*(?:or|and|,)\s*\}|\s+(?:or|and)\s+|(?<=[)\]])\s*(?:or|and)\s*(?=[(\[])")
# 1,22 / 0,25 / 1000,99: a decimal comma (one comma, 2+ digits after it; one digit and two after, or a
# leading 0, or 4+ digits before). "1,2", "0,1" and "10,11" stay lists and "12,345" a thousands-grouped number; the rule is the same for gold and answer.
_DECIMAL_COMMA_RE = re.compile(r"^(-?)(0|\d{4,}|[1-9](?=,\d{2}$)),(\d{2,})$", re.ASCII)
# 4 4/9, 2\frac{1}{2}: a mixed number (proper fraction after an integer)
_MIXED_RE = re.compile(r"^(-?)(\d+)(?:\s+(\d+)/(\d+)|\s*\\frac\{(\d+)\}\{(\d+)\})$", re.ASCII)
_PERCENT_WORD_RE = re.compile(r"\s*(?:percent(?:age)?|pct)\.?$", re.IGNORECASE)


_UNICODE = {
    "±": "\\pm ", "∓": "\\mp ", "√": "\\sqrt", "∛": "\\sqrt[3]", "π": "\\pi ", "∞": "\\infty ",
    "−": "-", "–": "-", "×": "\\times ", "÷": "\\div ", "·": "\\cdot ", "⋅": "\\cdot ", "≤": "\\le ",
    "≥": "\\ge ", "≠": "\\ne ", "∪": "\\cup ", "∩": "\\cap ", "∈": "\\in ", "ℤ": "\\mathbb{Z}",
    "ℝ": "\\mathbb{R}", "ℕ": "\\mathbb{N}", "ℚ": "\\mathbb{Q}", "∅": "\\emptyset ", "θ": "\\theta ",
    "α": "\\alpha ", "β": "\\beta ", "\u00a0": " ", "\u2009": " ", "\u202f": " ", "’": "'",
    "½": "\\frac{1}{2}", "⅓": "\\frac{1}{3}", "⅔": "\\frac{2}{3}", "¼": "\\frac{1}{4}", "¾": "\\frac{3}{4}",
    "⅕": "\\frac{1}{5}", "⅖": "\\frac{2}{5}", "⅗": "\\frac{3}{5}", "⅘": "\\frac{4}{5}", "⅙": "\\frac{1}{6}",
    "⅚": "\\frac{5}{6}", "⅛": "\\frac{1}{8}", "⅜": "\\frac{3}{8}", "⅝": "\\frac{5}{8}", "⅞": "\\frac{7}{8}",
}  # fmt: skip
_SUPERSCRIPTS = {"⁰": "0", "¹": "1", "²": "2", "³": "3", "⁴": "4", "⁵": "5", "⁶": "6", "⁷": "7", "⁸": "8", "⁹": "9"}
_SUPER_RE = re.compile("[⁰¹²³⁴⁵⁶⁷⁸⁹]+")
_UNICODE_RE = re.compile("|".join(map(re.escape, _UNICODE)))
_MARKDOWN_RE = re.compile(r"^(?:\*\*|`+)|(?:\*\*|`+)$")  # only at the ends: x**2 is a power
# "x = \frac{\pi}{4} + k\pi, k \in \mathbb{Z}", "... for any integer k": the qualifier is not the answer
_QUALIFIER_RE = re.compile(
    r"(?:,|;|\\text\{\s*,?\s*(?:for|where)[a-z ]*\}|\\quad|\s(?:for|where)(?:\s+(?:all|any|some|every))?)\s*"
    r"(?:\(?\s*[a-z](?:\s*,\s*[a-z])*\s*\\in\s*\\mathbb\s*\{?[ZNR]\}?\s*\)?|"
    r"(?:\\text\{\s*)?(?:[a-z]\s+(?:is|are)\s+(?:an?\s+)?)?(?:any\s+|all\s+)?integers?(?:\s+[a-z])?\s*\}?)\s*\.?$",
    re.ASCII,
)
_TEXT_QUALIFIER_RE = re.compile(
    r"\s*,?\s*\\text\s*\{\s*,?\s*(?:for|where|when|with|such\s+that|if|provided|whenever)\b[^{}]*\}.*$", re.S
)
_ALL_REALS = frozenset(
    ["all real numbers", "all reals", "all real values", "all real x", "\\mathbb{r}", "(-\\infty, \\infty)"]
)
_NO_SOLUTION = frozenset(
    ["no solution", "no solutions", "no real solution", "no real solutions", "none", "no such", "\\{\\}",
     "\\emptyset", "there is no solution", "no real roots", "no roots"]
)  # fmt: skip
_TEXT_CHOICE_RE = re.compile(r"\\text(?:bf|rm|normal)?\s*\{\s*\(([A-E])\)\s*\}")
_FACTORIAL_EQ_RE = re.compile(r"(\d+)!\s+=(?!=)")
_TRAILING_DELIMS_RE = re.compile(r"(?:\\\]|\\\)|\$)+$|^(?:\\\[|\\\(|\$)+")


_SEMI_TUPLE_RE = re.compile(r"\([^(),]*;[^(),]*\)")


_PARTNER = {"{": "}", "(": ")", "[": "]", "}": "{", ")": "(", "]": "["}


def match_bracket(s: str, i: int) -> int:
    """Index of the bracket that closes ``s[i]`` (an opening one: searching forward) or opens it (a closing one:
    searching back); -1 when unbalanced."""
    here, there = s[i], _PARTNER[s[i]]
    step = 1 if here in "{([" else -1
    depth, j = 0, i
    while 0 <= j < len(s):
        if s[j] == here:
            depth += 1
        elif s[j] == there:
            depth -= 1
            if depth == 0:
                return j
        j += step
    return -1


_WRAPPER_RE = re.compile(
    r"\\(?:mathbf|mathrm|textbf|boldsymbol|bm|mathit|textit|mathsf|textnormal|mathnormal|displaystyle)\s*\{"
)
_BASE_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
               "eleven": 11, "twelve": 12, "sixteen": 16}  # fmt: skip
_BASE_RE = re.compile(
    r"(?<=\d)_\s*\{?\s*(?:\\(?:text|mathrm)\s*\{\s*(" + "|".join(_BASE_WORDS) + r")\s*\}|(\d{1,2}))\s*\}?"
)


def _unwrap_math(s: str) -> str:
    """``\\mathbf{9\\sqrt{10}}`` -> ``9\\sqrt{10}``: a font command around math (not around words, which
    the text rules handle) is dropped, with brace matching."""
    for _ in range(8):
        m = _WRAPPER_RE.search(s)
        while m is not None:
            close = match_bracket(s, m.end() - 1)
            inner = s[m.end() : close] if close != -1 else ""
            if close != -1 and re.search(r"[\\{}\d^+\-/=]", inner):
                s = s[: m.start()] + inner + s[close + 1 :]
                break
            m = _WRAPPER_RE.search(s, m.end())
        else:
            return s
    return s


def unicode_math(s: str) -> str:
    """Unicode math signs as LaTeX (``±`` -> ``\\pm``, ``x²`` -> ``x^{2}``, ``−`` -> ``-``)."""
    if s.isascii():
        return s
    s = _SUPER_RE.sub(lambda m: "^{" + "".join(_SUPERSCRIPTS[c] for c in m.group(0)) + "}", s)
    s = _UNICODE_RE.sub(lambda m: _UNICODE[m.group(0)], s)
    return re.sub(r"\\sqrt(?:\[3\])?(\d+|[a-zA-Z])", lambda m: m.group(0)[: -len(m.group(1))] + "{" + m.group(1) + "}", s)


def _strip_delims(s: str) -> str:
    changed = True
    while changed:
        changed = False
        s = s.strip()
        for open_, close in _DELIMS:
            if len(s) >= len(open_) + len(close) and s.startswith(open_) and s.endswith(close):
                s = s[len(open_) : len(s) - len(close)]
                changed = True
                break
        if s.startswith("\\boxed{") and s.endswith("}"):
            s = s[len("\\boxed{") : -1]
            changed = True
    return s


def _drop_text(s: str) -> str:
    """``\\text{}`` groups: conjunctions become commas, units after math are dropped, text alone is kept."""
    s = _CONJ_RE.sub(",", s)
    if ",," in s.replace(" ", ""):
        s = re.sub(r",(?:\s*,)+", ",", s)  # "19, 46, \text{ and } 82"
    if not _TEXT_RE.search(s):
        return s
    rest = _UNIT_RE.sub("", s).strip()
    if rest and re.search(r"[\w\\]", rest):
        return rest  # math with units: keep the math
    return _TEXT_RE.sub(r"\1", s)


# ------------------------------------------------------------------ repairs of common slips (answers as models and JSON files mangle them)
_DOUBLE_BS_RE = re.compile(r"\\\\(?=[a-zA-Z{}%$])")  # \\frac (JSON-escaped twice) -> \frac
_STRAY_BS_RE = re.compile(r"(?<!\\)\\(?=\d)")  # \42 -> 42 (a backslash before a number means nothing)
ORDINAL_RE = re.compile(
    r"(?<=\d)\s*(?:\^\s*\{?\s*)?(?:\\(?:text|mathrm|textrm|rm|mbox)\s*\{?\s*)?(?:st|nd|rd|th)\b\s*\}?\s*\}?",
)
_FONT_SWITCH_RE = re.compile(r"\\(?:bf|rm|it|sf|tt|bold|mathbf|boldsymbol|bm|mathrm|textbf)\s*(?=\d)|\\(?:bf|rm|it|sf|tt)\b\s*")
COLOR_RE = re.compile(r"\\(?:color|textcolor)\s*\{[a-zA-Z]{1,20}\}")
_FRAC_ALIAS_RE = re.compile(r"\\(?:nicefrac|sfrac|dfrac|tfrac|cfrac)(?![a-zA-Z])")
_BRACE_RE = re.compile(r"\\(?:underbrace|overbrace|underset\s*\{[^{}]*\}|overset\s*\{[^{}]*\})\s*\{([^{}]*)\}(?:[_^]\s*\{[^{}]*\})?")
_MATHBB_DIGITS_RE = re.compile(r"\\mathbb\s*\{\s*(\d+)\s*\}")
_LEADING_REL_RE = re.compile(r"^(?:=|\\approx|\\sim|\\simeq|\\Rightarrow|\\implies|\\therefore|\\to)\s*(?=\S)")
_REPEATING_RE = re.compile(r"^(-?)(\d*)\.(\d*)\\(?:overline|bar|dot)\s*\{?\s*(\d{1,6})\s*\}?$", re.ASCII)
_TEXT_LHS_RE = re.compile(r"\\(?:text|mathrm|textbf|textit|mbox)\s*\{\s*([A-Za-z][A-Za-z ]{0,30}?)\s*\}\s*(?==)")
_END_UNIT_RE = re.compile(
    r"(?<=\d)(?:\s|\\[,;: !])*\\(?:mathrm|rm|mbox)\s*\{\s*(?:[a-df-hj-zA-Z]|[a-zA-Z]{2,4})\s*\}"
    r"(?:\^\s*\{?\s*[23]\s*\}?)?\s*$"
)


def _brace_balance(s: str) -> int:
    """Unescaped ``{`` minus unescaped ``}``."""
    n = i = 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        n += (c == "{") - (c == "}")
        i += 1
    return n


def _repeating(m: re.Match) -> str:
    sign, whole, fixed, rep = m.group(1), m.group(2) or "0", m.group(3), m.group(4)
    from fractions import Fraction

    value = Fraction(int(whole + fixed or "0"), 10 ** len(fixed)) + Fraction(int(rep), (10 ** len(rep) - 1) * 10 ** len(fixed))
    text = f"{value.numerator}/{value.denominator}" if value.denominator != 1 else str(value.numerator)
    return sign + text


def repair(s: str) -> str:
    """Common slips that make an answer unreadable, undone (``\\boxed{\\42}``, ``3^{\\text{rd}}``, ``\\\\frac``,
    an unclosed ``\\boxed{``, ``\\color{red}{16}``, ``\\nicefrac``, ``= 16``, ``0.\\overline{3}``)."""
    if "\\" in s:
        if "\\\\\\\\" in s:  # a matrix row break written \\\\ (doubled): \\
            s = s.replace("\\\\\\\\", "\\\\")
        if "\\\\" in s and ("\\begin" not in s or "\\\\begin" in s):  # \\frac, \\begin: all doubled
            s = _DOUBLE_BS_RE.sub(r"\\", s)
        s = _STRAY_BS_RE.sub("", s)
        if s.startswith("\\boxed{") and _brace_balance(s) > 0:
            s = s[len("\\boxed{") :]  # a box left unclosed
        s = COLOR_RE.sub("", s)
        s = _FONT_SWITCH_RE.sub("", s)
        s = _FRAC_ALIAS_RE.sub(r"\\frac", s)
        s = _MATHBB_DIGITS_RE.sub(r"\1", s)
        for _ in range(3):
            s2 = _BRACE_RE.sub(r"\1", s)
            if s2 == s:
                break
            s = s2
        s = _TEXT_LHS_RE.sub(r"\1", s)
        s = _END_UNIT_RE.sub("", s)
    if "{" in s or "}" in s:
        b = _brace_balance(s)
        if b > 0 and b <= 3:
            s = s + "}" * b  # \frac{1}{2 (cut off): closed
        elif b < 0:
            k = len(s)
            while b < 0 and k > 0 and s[k - 1] in "} ":
                b += s[k - 1] == "}"
                k -= 1
            s = s[:k]  # "7}": a brace left over from the box around it
    if any(t in s for t in ("st", "nd", "rd", "th")):
        s = ORDINAL_RE.sub("", s)
    s = _LEADING_REL_RE.sub("", s.strip())
    while len(s) > 2 and s[0] == "{" and "," not in s and match_bracket(s, 0) == len(s) - 1:
        s = s[1:-1].strip()  # {{9}}, \color{red}{16} -> 16: braces around the whole answer group nothing
    m = _REPEATING_RE.match(s)
    if m:
        s = _repeating(m)
    return s


@lru_cache(maxsize=1 << 16)
def normalize(answer: str) -> str:
    """The canonical string form of an answer (idempotent, cheap, no parsing)."""
    s = unicode_math(answer)
    s = _MARKDOWN_RE.sub("", s)
    s = _strip_delims(s)
    s = repair(s)
    s = _strip_delims(s)
    s = _TRAILING_DELIMS_RE.sub("", s).strip()
    s = _QUALIFIER_RE.sub("", s).strip()
    s = _PERCENT_WORD_RE.sub("%", s).rstrip(",;").strip()
    if not s:
        return ""
    if "_" in s:  # 101001_{\text{two}}, 1011_{2}: a base subscript
        s = _BASE_RE.sub(lambda m: "_" + (str(_BASE_WORDS[m.group(1)]) if m.group(1) else m.group(2)), s)
    if "\\" in s:
        s = _MATH_LETTER_RE.sub(r"\1", _unwrap_math(s))
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\cfrac", "\\frac")
    s = s.replace("\\%", "%").replace("\\$", "").replace("$", "")
    s = s.replace("\\leq", "\\le").replace("\\geq", "\\ge").replace("\\neq", "\\ne")
    s = s.replace("\\infin", "\\infty").replace("\\infty", "\\infty")
    if "\\varnothing" in s or "\\langle" in s:
        s = s.replace("\\varnothing", "\\emptyset").replace("\\langle", "(").replace("\\rangle", ")")
    s = _DEGREE_RE.sub("", s)
    s = _LEFTRIGHT_RE.sub("", s)
    s = _THIN_THOUSANDS_RE.sub("", s)
    s = _SPACING_RE.sub(" ", s)
    s = _QUALIFIER_RE.sub("", s).strip()
    if "\\text" in s and "\\begin" not in s:
        s2 = _TEXT_QUALIFIER_RE.sub("", s).strip()
        s = s2 or s  # "2 \text{ for all } x > 0": the condition is not the answer
    if "!" in s:
        s = _FACTORIAL_EQ_RE.sub(r"(\1!)=", s)  # "5! = 120" is not "5 != 120"
    if "(" in s and "\\text" in s:
        s = _TEXT_CHOICE_RE.sub(r"(\1) ", s)  # \textbf{(B) } 5: the choice letter is no unit
    s = _drop_text(s)
    for _ in range(3):
        s2 = _UNWRAP_RE.sub(r"\1", s)
        if s2 == s:
            break
        s = s2
    s = _FRAC_DIGITS_RE.sub(r"\\frac{\1}{\2}", s)
    s = _FRAC_HALF_RE.sub(r"\\frac{\1}", s)
    s = _FRAC_TAIL_RE.sub(r"\1{\2}", s)
    s = _SQRT_PAREN_RE.sub(r"\\sqrt{\1}", s)  # 4\sqrt(2): a common slip for 4\sqrt{2}
    s = _SQRT_RE.sub(lambda m: "\\sqrt" + (m.group(1) or "") + "{" + m.group(2) + "}", s)
    s = _THOUSANDS_RE.sub(lambda m: m.group(1).replace(",", "") + (m.group(2) or ""), s)
    s = " ".join(s.split())
    m = _DECIMAL_COMMA_RE.match(s)
    if m:
        s = f"{m.group(1)}{m.group(2)}.{m.group(3)}"
    s = _OP_SPACE_RE.sub(r"\1", s).replace(",", ", ")  # "1, 234" stays a list, also when normalized again
    if not s.endswith(("...", "\\ldots", "\\cdots", "\\dots")):
        s = s.rstrip(".,; ").strip()
    s = s.rstrip("\\").strip() if s.endswith("\\") and not s.endswith("\\\\") else s
    if ";" in s:  # (0;0;6), -12;-11: semicolons as separators
        s = s.replace(";", ", ") if "," not in s else _SEMI_TUPLE_RE.sub(lambda m: m.group(0).replace(";", ", "), s)

    m = _MIXED_RE.match(s.rstrip("%"))
    if m:
        num, den = (m.group(3), m.group(4)) if m.group(3) else (m.group(5), m.group(6))
        if int(den) > 0 and int(num) < int(den):
            pct = "%" if s.endswith("%") else ""
            s = f"{m.group(1)}{int(m.group(2)) * int(den) + int(num)}/{den}{pct}"
    m = _GLUED_UNIT_RE.match(s)
    if m and ("," in m.group(1) or "." in m.group(1) or "^" in s or len(s) - len(m.group(1)) > 1):
        s = m.group(1).replace(",", "") if _THOUSANDS_RE.fullmatch(m.group(1).split(".")[0]) else m.group(1)
    m = _NUMBER_WORDS_RE.match(s)  # "5 cm", "12 apples", "3.5 square feet"
    if m and not any(w.lower() in KNOWN_NAMES for w in m.group(2).split()):
        s = m.group(1)
    low = s.casefold().rstrip(".")
    if low in _ALL_REALS:
        return "(-\\infty, \\infty)"
    if low in _NO_SOLUTION:
        return "\\emptyset"
    m = _CHOICE_RE.match(s)
    if m:  # (B), b, "C. x = 42": a multiple-choice letter
        s = (m.group(1) or m.group(2)).upper()
    if s.startswith("+") and len(s) > 1 and s[1].isdigit():
        s = s[1:]
    return s


def split_top_level(s: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside any brackets (``\\{``/``\\}`` count as brackets)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s) and s[i + 1] in "{}":
            depth += 1 if s[i + 1] == "{" else -1
            i += 2
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(s[start:i])
            start = i + 1
        i += 1
    parts.append(s[start:])
    return parts
