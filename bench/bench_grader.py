"""Grader throughput and latency: plain-number answers vs LaTeX expressions, cold and warm cache; and the
speed ratio against Math-Verify 0.8.0 measured in the same run.

    python bench/bench_grader.py [--quick] [--workers 1] [--no-math-verify]
    python bench/bench_grader.py --loaded 10000 [--workers 2]   # same verdicts on an idle and a loaded machine

Table 1, one row per (category, cache): verdicts/s for one ``grade_batch`` call over all pairs, and
p50/p99 latency of single ``grade`` calls. "cold" clears the verdict cache first (the sympy workers are
already started: their start-up time is printed separately); "warm" grades the same pairs again.

Table 2 (when math-verify is installed): the same pairs graded by mcprm (cold cache) and by Math-Verify
(``verify(parse(gold), parse(response))``, its defaults, through ``graders/mathverify.py``), verdicts/s of
each and the ratio; plus hostile
64 KB inputs (the worst case of a regex that backtracks), seconds per input for each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import graders  # noqa: E402
from graders import CACHE, GraderConfig, grade, grade_batch  # noqa: E402


def plain_pairs(n: int) -> list[tuple[str, str]]:
    """Short GSM8K-style continuations; many pairs share a gold, about a third are wrong."""
    out = []
    for i in range(n):
        gold = str(100 + i // 8)
        a, b = 40 + i % 13, 3 + i % 5
        value = int(gold) + (i % 3 == 0)
        form = i % 4
        if form == 0:
            resp = f"{a} * {b} = {a * b}\n{a * b} - 8 = {value}\nThe answer is \\boxed{{{value}}}."
        elif form == 1:
            resp = f"So she has {value} apples.\n#### {value:,}"
        elif form == 2:
            resp = f"The answer is {value}.5" if i % 7 == 0 else f"The answer is \\frac{{{2 * value}}}{{2}}."
        else:
            resp = f"Final answer: {value}.0"
        out.append((gold, resp))
    return out


def latex_pairs(n: int) -> list[tuple[str, str]]:
    """Answers that need sympy: radicals, symbolic fractions, intervals, tuples, equations."""
    makers = [
        lambda k: (rf"\frac{{\sqrt{{{k}}}}}{{2}}", rf"\frac{{1}}{{2}}\sqrt{{{k}}}"),
        lambda k: (rf"{k}\sqrt{{2}}", rf"\sqrt{{{2 * k * k}}}"),
        lambda k: (rf"\frac{{x^2-{k * k}}}{{x-{k}}}", f"x+{k}"),
        lambda k: (rf"({k}, \infty)", rf"x > {k}"),
        lambda k: (rf"({k}, {k + 2})", rf"({k + 2}, {k})"),
        lambda k: (f"y = {k}x + 1", f"{k}x+1"),
        lambda k: (rf"\sqrt{{{k}}} + 1", rf"\sqrt{{{k + 1}}}"),
        lambda k: (rf"{k}\pi", rf"\frac{{{2 * k}\pi}}{{2}}"),
    ]
    return [
        (g, f"Thus the answer is $\\boxed{{{a}}}$.") for i in range(n) for g, a in [makers[i % 8](2 + i // 8)]
    ]


_STEPS = [
    "First, let's understand what the problem asks. We need the value of $x$ such that $f(x) = {v}$.",
    "### Step 1: Set up the equation\nWe have \\[ 3x + 7 = {a} \\] so \\( 3x = {b} \\).",
    "**Step 2.** Simplify: $\\frac{{{b}}}{{3}} = {c}$, and since $x > 0$ the other root is rejected.",
    "Checking: $3 \\cdot {c} + 7 = {a}$, which matches. Now compute the total: ${c} + {d} = {e}$.",
    "- The first part gives {a}\n- The second part gives {d}\n\nAdding these, we get {e}.",
]
_ENDINGS = [
    "Therefore, the final answer is $\\boxed{{{ans}}}$.",
    "Final Answer: The final answer is ${ans}$. I hope it is correct.",
    "**Final Answer**\n\\[\n\\boxed{{{ans}}}\n\\]",
    "So the answer is {ans}.",
    "#### {ans}",
    "Thus the value is \\({ans}\\).",
]
_LATEX_GOLDS = [
    (r"\frac{{{k}}}{{{m}}}", r"\dfrac{{{k}}}{{{m}}}"), (r"{k}\sqrt{{2}}", r"\sqrt{{{kk2}}}"),
    (r"({k}, {m}]", r"({k},{m}]"), (r"\frac{{\sqrt{{3}}}}{{{k}}}", r"\frac{{1}}{{{k}}}\sqrt{{3}}"),
    (r"({k}, -{m})", r"({k},-{m})"), ("{k}", "{k}"), (r"{k}\pi", r"{k}\pi"), ("{k}", "{k}.0"),
]  # fmt: skip


def real_style_pairs(n: int) -> list[tuple[str, str]]:
    """Chain-of-thought responses of 5 to 9 paragraphs with intermediate math, then one of six endings;
    MATH-style gold answers (fractions, radicals, intervals, tuples, integers); about a quarter wrong."""
    out = []
    for i in range(n):
        k, m = 2 + i, 3 + 2 * i  # every pair distinct: no help from the verdict cache
        gold_t, ans_t = _LATEX_GOLDS[i % len(_LATEX_GOLDS)]
        gold = gold_t.format(k=k, m=m, kk2=2 * k * k)
        ans = ans_t.format(k=k + (i % 4 == 0), m=m, kk2=2 * k * k)
        nums = {"v": k, "a": 3 * k + 7, "b": 3 * k, "c": k, "d": m, "e": k + m}
        body = "\n\n".join(_STEPS[j % len(_STEPS)].format(**nums) for j in range(5 + i % 5))
        out.append((gold, body + "\n\n" + _ENDINGS[i % len(_ENDINGS)].format(ans=ans)))
    return out


def hostile_inputs() -> list[tuple[str, str]]:
    """64 KB responses built to make backtracking regexes quadratic."""
    k = 65_536
    return [
        ("9", "1," * (k // 2)), ("9", " " * k + "x"), ("9", "answer:" * (k // 7)), ("9", "$" * k),
        ("9", "\\boxed{" * (k // 7)), ("9", "1 " + "a" * k + "!"), ("9", "12345678" * (k // 8) + "x"),
        ("9", "(" * k), ("9", "#### " * (k // 5)), ("9", "\\frac{1}{" * (k // 9)),
    ]  # fmt: skip


def math_verify_rate(pairs) -> float:
    """Math-Verify through mcprm's adapter (``--grader math-verify``: its defaults, a bare gold in $...$)."""
    from graders import get_grader

    t0 = time.perf_counter()
    get_grader("math-verify").grade_batch(pairs, GraderConfig())
    return len(pairs) / (time.perf_counter() - t0)


def versus_math_verify(config, quick: bool) -> None:
    try:
        import math_verify  # noqa: F401
    except ImportError:
        print("\n(math-verify not installed: pip install 'math-verify[antlr4_13_2]' for the comparison)")
        return
    n_plain, n_real, n_latex = (400, 200, 80) if quick else (4000, 1500, 400)
    print(f"\nmcprm vs math-verify 0.8.0, same pairs, same run (mcprm cache cleared; {config.workers} worker(s))")
    print(f"{'category':<22} {'pairs':>6} {'mcprm v/s':>10} {'m-v v/s':>9} {'ratio':>7}")
    for name, pairs in (
        ("plain numbers", plain_pairs(n_plain)),
        ("real-style responses", real_style_pairs(n_real)),
        ("LaTeX (sympy)", latex_pairs(n_latex)),
    ):
        CACHE.clear()
        mine = throughput(pairs, config)
        theirs = math_verify_rate(pairs)
        print(f"{name:<22} {len(pairs):>6} {mine:>10,.0f} {theirs:>9,.0f} {mine / theirs:>6.1f}x")
    hostile = hostile_inputs()
    CACHE.clear()
    t0 = time.perf_counter()
    grade_batch(hostile, config)
    mine = (time.perf_counter() - t0) / len(hostile)
    t0 = time.perf_counter()
    math_verify_rate(hostile)
    theirs = (time.perf_counter() - t0) / len(hostile)
    print(f"{'hostile 64 KB inputs':<22} {len(hostile):>6} {mine:>9.3f}s {theirs:>8.3f}s {theirs / mine:>6.1f}x")


def heavy_pairs(n: int) -> list[tuple[str, str]]:
    """Pairs whose comparison costs sympy tenths of a second of CPU (sums, identities, matrices), all distinct."""
    makers = [
        lambda k: (rf"\frac{{n(n+1)}}{{2}} + {k}n", rf"\boxed{{\sum_{{j=1}}^{{n}} (j + {k})}}"),
        lambda k: (rf"\frac{{n(n+1)(2n+1)}}{{6}} + {k}", rf"\boxed{{{k} + \sum_{{j=1}}^{{n}} j^2}}"),
        lambda k: (rf"{k}", rf"\boxed{{{k}\sin^2 x + {k}\cos^2 x}}"),
        lambda k: (rf"\begin{{pmatrix}} {k} & 2 \\ 3 & 4 \end{{pmatrix}}",
                   rf"\boxed{{\begin{{pmatrix}} {k} & 2 \\ 3 & {4 + k % 2} \end{{pmatrix}}}}"),
        lambda k: (rf"x^2+x+{k}", rf"\boxed{{\frac{{x^3-1}}{{x-1}} + {k - 1}}}"),
    ]  # fmt: skip
    return [makers[i % len(makers)](2 + i // len(makers)) for i in range(n)]


def loaded_check(n: int, workers: int, timeout_s: float = 2.0) -> int:
    """The same ``n`` pairs graded on an idle machine and beside CPU burners (two per core): identical verdicts?"""
    import subprocess

    from graders.pool import get_pool

    n_heavy, n_latex, n_real = n // 100, n // 10, n // 5
    pairs = heavy_pairs(n_heavy) + latex_pairs(n_latex) + real_style_pairs(n_real)
    pairs += plain_pairs(n - len(pairs))
    config = GraderConfig(workers=workers, timeout_s=timeout_s)
    grade(r"\sqrt{2}", r"\boxed{\sqrt{2}+0}", config)  # start the workers
    runs = []
    for label in ("idle", "loaded"):
        burners = []
        if label == "loaded":
            burners = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 * (os.cpu_count() or 1))
            ]
        try:
            CACHE.clear()
            pool = get_pool(workers)
            r0, t0_ = getattr(pool, "retries", 0), pool.timeouts
            t0 = time.perf_counter()
            verdicts = grade_batch(pairs, config)
            wall = time.perf_counter() - t0
        finally:
            for b in burners:
                b.kill()
                b.wait()
        runs.append((label, verdicts, wall, getattr(pool, "retries", 0) - r0, pool.timeouts - t0_))
    (_, idle, *_), (_, loaded, *_) = runs
    differ = sum(a != b for a, b in zip(idle, loaded, strict=True))
    print(f"{n} pairs ({n_heavy} heavy sympy, {n_latex} LaTeX, {n_real} real-style, rest plain), "
          f"{workers} worker(s), CPU budget {config.timeout_s}s per verdict, {2 * (os.cpu_count() or 1)} burners")
    print(f"{'run':<8} {'wall s':>8} {'retried':>8} {'timeouts':>9} {'True':>6} {'False':>6} {'None':>5}")
    for label, vs, wall, retried, timeouts in runs:
        c = [v.correct for v in vs]
        print(f"{label:<8} {wall:>8.1f} {retried:>8} {timeouts:>9} {c.count(True):>6} {c.count(False):>6} "
              f"{c.count(None):>5}")
    print(f"verdicts that differ between the runs: {differ}")
    return differ


def throughput(pairs, config) -> float:
    t0 = time.perf_counter()
    grade_batch(pairs, config)
    return len(pairs) / (time.perf_counter() - t0)


def latency(pairs, config) -> tuple[float, float]:
    """p50 and p99 in ms of single ``grade`` calls."""
    lat = []
    for g, r in pairs:
        t = time.perf_counter()
        grade(g, r, config)
        lat.append((time.perf_counter() - t) * 1000)
    lat.sort()
    return statistics.median(lat), lat[min(len(lat) - 1, int(0.99 * len(lat)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer pairs (a few seconds)")
    ap.add_argument("--workers", type=int, default=1, help="sympy worker processes (default 1: one core)")
    ap.add_argument("--no-math-verify", action="store_true", help="skip the comparison with Math-Verify")
    ap.add_argument("--timeout", type=float, default=2.0, help="--loaded: the budget per verdict (seconds)")
    ap.add_argument("--loaded", type=int, metavar="N", default=0,
                    help="only: grade N pairs idle and beside CPU burners, and count the verdicts that differ")
    args = ap.parse_args()
    if args.loaded:
        differ = loaded_check(args.loaded, args.workers, args.timeout)
        graders.shutdown()
        sys.exit(1 if differ else 0)
    n_plain, n_latex = (4000, 80) if args.quick else (40000, 400)
    config = GraderConfig(workers=args.workers)

    t0 = time.perf_counter()
    grade(r"\sqrt{2}", r"\boxed{\sqrt{2}+0}", config)
    start_s = time.perf_counter() - t0

    rows = []
    for name, pairs, n_lat in (
        ("plain numbers", plain_pairs(n_plain), 2000),
        ("LaTeX (sympy)", latex_pairs(n_latex), n_latex),
    ):
        # cold: empty cache; rate on one half, latency on the other half (not graded yet)
        half = len(pairs) // 2
        CACHE.clear()
        cold_rate = throughput(pairs[:half], config)
        CACHE.clear()
        p50, p99 = latency(pairs[half:][:n_lat], config)
        rows.append((name, "cold", cold_rate, p50, p99, len(pairs)))
        throughput(pairs, config)  # fill the cache
        warm_rate = throughput(pairs, config)
        p50, p99 = latency(pairs[:n_lat], config)
        rows.append((name, "warm", warm_rate, p50, p99, len(pairs)))

    print(
        f"grader {graders.GRADER_VERSION}, {args.workers} sympy worker(s), worker start {start_s:.2f}s, "
        f"timeout {config.timeout_s}s"
    )
    print(f"{'category':<16} {'cache':<5} {'pairs':>6} {'verdicts/s':>11} {'p50 ms':>8} {'p99 ms':>8}")
    for name, cache, vps, p50, p99, n in rows:
        print(f"{name:<16} {cache:<5} {n:>6} {vps:>11,.0f} {p50:>8.3f} {p99:>8.3f}")
    if not args.no_math_verify:
        versus_math_verify(config, args.quick)
    graders.shutdown()


if __name__ == "__main__":
    main()
