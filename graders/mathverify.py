"""Math-Verify (huggingface/Math-Verify) as a registered alternative grader: ``--grader math-verify``.

For users who want to compare mcprm's grader with the library they would otherwise pick, on their own data.
It runs in-process with Math-Verify's defaults (``verify(parse(gold), parse(response))``, a bare gold wrapped
in ``$...$`` as Math-Verify's documentation does: unwrapped, ``6\\sqrt{2}`` parses to ``6``); Math-Verify's
own time limit uses signals and works only in the main thread, so elsewhere it runs without one. mcprm's
``sympy`` grader stays the default: it runs every sympy call in a killable process.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

from graders.config import GraderConfig
from graders.pairs import check_pair
from graders.verdict import CRASH, GOLD, NO_ANSWER, NO_ANSWER_KIND, VERDICT, Verdict


def _check_installed():
    try:
        import math_verify
    except ImportError:
        raise ImportError(
            "the 'math-verify' grader needs Math-Verify: pip install 'math-verify[antlr4_13_2]'"
        ) from None
    return math_verify


class MathVerifyGrader:
    name = "math-verify"

    def __init__(self):
        mv = _check_installed()
        self.version = f"math-verify-{getattr(mv, '__version__', 'unknown')}"

    def grade_batch(self, pairs: Sequence[tuple[str, str]], config: GraderConfig) -> list[Verdict]:
        from math_verify import parse, verify

        limit = math.ceil(config.timeout_s) if threading.current_thread() is threading.main_thread() else None
        gold_cache: dict[str, list] = {}
        out = []
        for i, pair in enumerate(pairs):
            gold, response = check_pair(i, pair)
            try:
                g = gold_cache.get(gold)
                if g is None:  # a bare gold is LaTeX: Math-Verify reads it whole only inside $...$
                    delimited = any(m in gold for m in ("$", "\\(", "\\[", "\\boxed"))
                    first = gold if delimited else f"${gold}$"
                    g = parse(first, parsing_timeout=limit) or parse(gold, parsing_timeout=limit)
                    gold_cache[gold] = g
                a = parse(response, parsing_timeout=limit)
                if not a:
                    out.append(Verdict(False, NO_ANSWER, None, why=NO_ANSWER_KIND))
                elif not g:
                    out.append(Verdict(None, "gold unparseable", str(a[-1]), why=GOLD))
                else:
                    ok = verify(g, a, timeout_seconds=limit)
                    out.append(Verdict(bool(ok), "math-verify", str(a[-1]), why=VERDICT))
            except Exception as e:  # noqa: BLE001 - a third-party grader must not stop a run
                out.append(Verdict(None, f"math-verify failed: {type(e).__name__}", None, why=CRASH))
        return out
