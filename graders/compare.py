"""The in-process comparison rules, cheapest first; what they cannot decide goes to the sympy workers.

1. refuse answers that could explode (:func:`graders.normalize.prescreen`) -> None;
2. normalized strings equal -> True;
3. both plain numbers -> exact rational comparison (``0.5`` = ``\\frac12`` = ``1/2``; percent policy;
   a decimal may round a non-terminating rational, ``0.333`` = ``\\frac13``);
4. words (``Monday``, ``yes``) -> case-insensitive text comparison;
5. strings that cannot be math (code, quotes, unknown names) -> None, never parsed.

Everything else returns None from :func:`compare_fast` and is decided by
:func:`graders.symbolic.sympy_verdict` in a worker process.
"""

from __future__ import annotations

from graders.config import GraderConfig
from graders.normalize import check_math, is_text_answer, prescreen
from graders.numbers import Number, approx_equal, parse_number

Result = tuple[bool | None, str]


def compare_numbers(gold: Number, answer: Number, config: GraderConfig) -> Result:
    """Exact comparison of two plain numbers under the percent and rounded-decimal policies."""
    for g in gold.candidates(config.percent):
        for a in answer.candidates(config.percent):
            if g == a:
                return True, "numeric: exact" + (" (percent)" if gold.percent or answer.percent else "")
    if not (gold.percent or answer.percent):
        k = config.approx_min_sig_digits
        if approx_equal(answer, gold.value, k) or approx_equal(gold, answer.value, k):
            return True, "numeric: rounded decimal"
    return False, "numeric: different values"


def compare_fast(gold: str, answer: str, config: GraderConfig) -> Result | None:
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
    g_num, a_num = parse_number(gold), parse_number(answer)
    if g_num is not None and a_num is not None:
        return compare_numbers(g_num, a_num, config)
    g_text, a_text = is_text_answer(gold), is_text_answer(answer)
    if g_text or a_text:
        if g_text and a_text:
            same = " ".join(gold.casefold().split()) == " ".join(answer.casefold().split())
            return same, "text" if same else "text: different words"
        return False, "text vs math"
    if len(gold) == 1 and len(answer) == 1 and gold.isalpha() and answer.isalpha():
        return gold.casefold() == answer.casefold(), "single letter"
    why = check_math(answer)
    if why:
        return None, f"answer unparseable: {why}"
    why = check_math(gold)
    if why:
        return None, f"gold unparseable: {why}"
    return None
