"""Grader throughput and latency: plain-number answers vs LaTeX expressions, cold and warm cache.

    python bench/bench_grader.py [--quick] [--workers 1]

Prints one table row per (category, cache): verdicts/s for one ``grade_batch`` call over all pairs, and
p50/p99 latency of single ``grade`` calls. "cold" clears the verdict cache first (the sympy workers are
already started: their start-up time is printed separately); "warm" grades the same pairs again.
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
    args = ap.parse_args()
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
    graders.shutdown()


if __name__ == "__main__":
    main()
