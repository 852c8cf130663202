"""The cheap checks run before any parsing: ``prescreen`` rejects inputs that could explode (megabyte strings,
deep nesting, power towers, huge exponents or factorials); ``check_math``, ``is_text_answer`` and ``lenient``
sort answers into plain numbers, words and math, rejecting strings that cannot be math (quotes, unknown long
names such as ``__import__``) before anything parses them."""

from __future__ import annotations

import math
import re

from graders.normalize import KNOWN_NAMES, match_bracket

_MAX_DEPTH = 40
_MAX_INT_DIGITS = 400
_MAX_EXPONENT = 10_000
_MAX_FACTORIAL = 5_000
_MAX_TOWER_LOG10 = 5_000.0  # at most a 5000-digit value
_CHAIN_RE = re.compile(r"\d+(?:\s*\^\s*[{(]?\s*\d+){2,}")
_FACTORIAL_RE = re.compile(r"(\d+)\s*!")
_INT_RE = re.compile(r"\d+")
_FORBIDDEN_RE = re.compile(r"[\"'`;@#?]|__|\.\s*[a-zA-Z_]|\blambda\b|\bimport\b")
_ENV_RE = re.compile(r"\\(?:begin|end)\{[a-zA-Z*]+\}")
_WORD_RE = re.compile(r"(\\?)([a-zA-Z]{2,})")


def _exponent_groups(s: str):
    """Yield the text of every exponent (``^{...}`` or ``^x``)."""
    i = s.find("^")
    while i != -1:
        j = i + 1
        while j < len(s) and s[j] == " ":
            j += 1
        if j < len(s) and s[j] in "{(":
            k = match_bracket(s, j)
            yield s[j + 1 : k if k != -1 else len(s)]  # unclosed: the rest of the string
        else:
            m = re.match(r"-?\d+|\\?[a-zA-Z]+", s[j:])
            if m:
                yield m.group(0)
        i = s.find("^", i + 1)


def _tower_log10(expo: str) -> float:
    """log10 of a purely numeric exponent expression like ``9^{9}`` (0 when it is not such a tower)."""
    parts = re.split(r"\^", expo.replace("{", "").replace("}", "").replace("(", "").replace(")", ""))
    if not all(p.strip().isdigit() for p in parts):
        return 0.0
    value_log10 = math.log10(max(int(parts[-1].strip() or 0), 1))
    for p in reversed(parts[:-1]):
        base = max(int(p.strip()), 1)
        if value_log10 > 300:  # base ** (10 ** value_log10) : log10 is astronomically large
            return math.inf
        value_log10 = (10**value_log10) * math.log10(base) if base > 1 else 0.0
    return value_log10


def _group_factorials(s: str):
    """(start, end) of every bracketed group followed by ``!``: ``(10^{100})!``."""
    pos = s.find("!")
    while pos != -1:
        j = pos - 1
        while j >= 0 and s[j] == " ":
            j -= 1
        if j >= 0 and s[j] in ")}":
            yield max(match_bracket(s, j), 0), j  # unopened: from the start
        pos = s.find("!", pos + 1)


def prescreen(s: str, max_chars: int = 1000) -> str | None:
    """A reason to refuse ``s`` before parsing (too long, too deep, too large to evaluate), else None."""
    if len(s) > max_chars:
        return f"too large: {len(s)} characters (limit {max_chars})"
    depth = max_depth = 0
    for c in s:
        if c in "{([":
            depth += 1
            if depth > max_depth:
                max_depth = depth
        elif c in "})]":
            depth -= 1
    if max_depth > _MAX_DEPTH:
        return f"too large: nesting depth {max_depth} (limit {_MAX_DEPTH})"
    for m in _INT_RE.finditer(s):
        if len(m.group(0)) > _MAX_INT_DIGITS:
            return f"too large: a {len(m.group(0))}-digit number"
    for m in _FACTORIAL_RE.finditer(s):
        if int(m.group(1)) > _MAX_FACTORIAL:
            return f"too large: factorial of {m.group(1)}"
    for i in _group_factorials(s):
        group = s[i[0] : i[1]]
        if "^" in group or "!" in group or any(int(n) > _MAX_FACTORIAL for n in _INT_RE.findall(group)):
            return "too large: factorial of a large expression"
    if "^" in s or "**" in s:
        t = s.replace("**", "^")
        for expo in _exponent_groups(t):
            e = expo.strip().lstrip("-")
            if e.isdigit() and int(e) > _MAX_EXPONENT:
                return f"too large: exponent {e}"
        for m in _CHAIN_RE.finditer(t):  # 9^{9^{9}}, 9**9**9: right-associative towers of literals
            if _tower_log10(m.group(0)) > _MAX_TOWER_LOG10:
                return "too large: power tower"
    return None


def check_math(s: str) -> str | None:
    """A reason why ``s`` cannot be a math answer (code, quotes, unknown long names), else None."""
    if _FORBIDDEN_RE.search(s):
        return "not a math expression (forbidden characters)"
    for m in _WORD_RE.finditer(_ENV_RE.sub("", s)):
        if m.group(1):  # a LaTeX command
            continue
        word = m.group(2)
        if len(word) > 3 and word.lower() not in KNOWN_NAMES:
            return f"not a math expression (unknown name {word!r})"
    return None


_TEXT_ANSWER_RE = re.compile(r"^[A-Za-z][A-Za-z\s\-]*$")


def is_text_answer(s: str) -> bool:
    """Plain words (``Monday``, ``yes``, ``acute triangle``), compared as case-insensitive text."""
    if not _TEXT_ANSWER_RE.match(s) or len(s) < 2:
        return False
    words = s.replace("-", " ").split()
    return not all(w.lower() in KNOWN_NAMES or len(w) == 1 for w in words)


# ------------------------------------------------------------------------------------- lenient reading
# LaTeX commands the parsers know; lenient() drops any other command (keeping its arguments).
PARSED_COMMANDS = frozenset(
    "frac dfrac tfrac sqrt pi infty infin cdot times div pm mp sin cos tan cot sec csc arcsin arccos arctan "
    "sinh cosh tanh log ln lg exp left right le ge ne lt gt leq geq neq approx in notin cup cap setminus "
    "emptyset varnothing mathbb begin end binom dbinom tbinom choose sum prod int lim to infty alpha beta "
    "gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi rho sigma tau phi "
    "varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Phi Psi Omega circ degree vert lvert rvert "
    "mid ldots cdots dots vdots ddots angle min max gcd lcm det mod bmod pmod operatorname mathrm mathit "
    "text mathbf boldsymbol overline bar hat vec dot ddot prime cdotp land lor neg wedge vee subset "
    "subseteq supset supseteq equiv lfloor rfloor lceil rceil langle rangle partial nabla".split()
)
_CMD_RE = re.compile(r"\\([a-zA-Z]+)")
_LENIENT_TEXT_RE = re.compile(r"\\(?:text|textbf|textit|textrm|mbox|mathrm|operatorname)\s*\{[^{}]*\}")
_PROSE_RE = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{2,}(?![a-zA-Z])")


def lenient(s: str) -> str | None:
    """A second, looser reading of an answer that could not be read: unknown LaTeX commands dropped (their
    arguments kept), ``\\text{}`` groups dropped, and prose around one piece of math dropped
    (``Tom has 13 apples`` -> ``13``). None when nothing different and readable is left."""
    t = s
    if "\\" in t:
        t = _LENIENT_TEXT_RE.sub(" ", t)
        t = _CMD_RE.sub(lambda m: m.group(0) if m.group(1) in PARSED_COMMANDS else " ", t)
    words = [w for w in _PROSE_RE.findall(_ENV_RE.sub(" ", t)) if w.lower() not in KNOWN_NAMES]
    if words:
        marked = _PROSE_RE.sub(lambda m: m.group(0) if m.group(0).lower() in KNOWN_NAMES else "\0", t)
        chunks = [c.strip(" ,.;:=") for c in marked.split("\0")]
        chunks = [c for c in chunks if c and re.search(r"[\d\\]", c)]
        if len(chunks) != 1:
            return None
        t = chunks[0]
    t = " ".join(t.split()).strip(" ,.;:")
    if not t or t == s or check_math(t) or not re.search(r"[\d\\a-zA-Z]", t):
        return None
    return t
