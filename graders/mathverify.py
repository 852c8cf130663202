"""Math-Verify (huggingface/Math-Verify) as a registered alternative grader: ``--grader math-verify``.

For users who want to compare mcprm's grader with the library they would otherwise pick, on their own data.
It runs Math-Verify's defaults (``verify(parse(gold), parse(response))``, a bare gold wrapped in ``$...$`` as
Math-Verify's documentation does: unwrapped, ``6\\sqrt{2}`` parses to ``6``) in the killable worker processes
of :mod:`graders.pool`, with the sympy grader's budgets: Math-Verify's own time limit uses signals, works only
in a main thread and cannot stop a computation that holds the GIL (``\\boxed{9^{9^{9^{9}}}}``), so it is off
there; the worker's CPU budget ends it, and the worker is replaced. ``sympy`` stays the default grader.
"""

from __future__ import annotations

from collections.abc import Sequence

from graders.config import GraderConfig
from graders.pairs import check_pair
from graders.verdict import CRASH, GOLD, NO_ANSWER, NO_ANSWER_KIND, VERDICT, Verdict, kind_of


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

    def warm(self, workers: int) -> None:
        """Start the ``workers`` grader processes now (they load sympy in the background)."""
        from graders.pool import get_pool

        get_pool(workers).warm()

    def grade_batch(self, pairs: Sequence[tuple[str, str]], config: GraderConfig) -> list[Verdict]:
        """Every pair graded in the killable worker processes of :mod:`graders.pool`, under the sympy grader's
        budgets (``config.timeout_s`` of CPU time, retried once with more, a wall-clock backstop, a memory
        limit): an answer that makes Math-Verify compute for ever (a power tower) is a timeout there, and the
        worker that held it is replaced; the labeling worker's own threads never run Math-Verify."""
        from graders.pool import get_pool

        tasks = [(*check_pair(i, pair), config, POOL_TASK) for i, pair in enumerate(pairs)]
        if not tasks:
            return []
        out = []
        for res in get_pool(config.workers).run(tasks, config.timeout_s):
            if len(res) == 4:
                correct, reason, extracted, why = res
                out.append(Verdict(correct, reason, extracted, why=why))
            else:  # the pool's own verdict: a timeout, a crashed worker, out of memory
                correct, reason = res[:2]
                out.append(Verdict(correct, reason, None, why=kind_of(correct, reason, None)))
        return out


POOL_TASK = "graders.mathverify:pool_verdict"  # what a pool worker runs for a pair (after :func:`warm_up`)


def warm_up() -> None:
    """Load Math-Verify's parser in a worker before its first budget (imports and the grammar's first parse)."""
    from math_verify import parse, verify

    verify(parse("$1$", parsing_timeout=None), parse("$1$", parsing_timeout=None), timeout_seconds=None)


def pool_verdict(gold: str, response: str, config: GraderConfig) -> tuple:
    """One pair, in a grader worker process (its main thread; the pool's CPU budget bounds it, so Math-Verify's
    own signal-based time limits are off). Returns (correct, reason, extracted, kind)."""
    from math_verify import parse, verify

    try:
        # a bare gold is LaTeX: Math-Verify reads it whole only inside $...$
        delimited = any(m in gold for m in ("$", "\\(", "\\[", "\\boxed"))
        g = parse(gold if delimited else f"${gold}$", parsing_timeout=None) or parse(gold, parsing_timeout=None)
        a = parse(response, parsing_timeout=None)
        if not a:
            return False, NO_ANSWER, None, NO_ANSWER_KIND
        if not g:
            return None, "gold unparseable", str(a[-1]), GOLD
        ok = verify(g, a, timeout_seconds=None)
        return bool(ok), "math-verify", str(a[-1]), VERDICT
    except Exception as e:  # noqa: BLE001 - a third-party grader must not stop a run
        return None, f"math-verify failed: {type(e).__name__}", None, CRASH
