#!/usr/bin/env python3
"""Can a map fitted on other samples recalibrate the defaults' ``first_error_confidence``?

Leave one sample out: fit a recalibration map (isotonic, and Platt's logistic map of the logit) on the rows of the
other samples' corpora (the exact checker as truth), apply it to the left-out sample, and print its ECE over five
equal-width bins beside the raw confidence's. Each corpus is refitted with this code's first-error model first.

    python bench/bench_recalibration.py CORPUS=SAMPLE.jsonl [CORPUS=SAMPLE.jsonl ...]

(SAMPLE.jsonl: the `data/make_sample.py` sample the corpus was labeled from, with ``reference_first_error``.)
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_calibration import _rows  # noqa: E402


def ece(pairs, bins=5):
    b = {}
    for c, y in pairs:
        x = b.setdefault(min(int(c * bins), bins - 1), [0, 0.0, 0])
        x[0] += 1
        x[1] += c
        x[2] += y
    return sum(abs(v[1] - v[2]) for v in b.values()) / len(pairs)


def _logit(p):
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def platt(pairs, iters=300, lr=0.5):
    a, b = 1.0, 0.0
    for _ in range(iters):
        ga = gb = 0.0
        for c, y in pairs:
            x = _logit(c)
            p = 1 / (1 + math.exp(-(a * x + b)))
            ga += (p - y) * x
            gb += p - y
        a -= lr * ga / len(pairs)
        b -= lr * gb / len(pairs)
    return lambda c: 1 / (1 + math.exp(-(a * _logit(c) + b)))


def isotonic(pairs):
    out = []  # blocks: [sum y, count, upper edge]
    for c, y in sorted(pairs):
        out.append([y, 1, c])
        while len(out) > 1 and out[-2][0] / out[-2][1] > out[-1][0] / out[-1][1]:
            last = out.pop()
            out[-1][0] += last[0]
            out[-1][1] += last[1]
            out[-1][2] = last[2]
    steps = [(hi, s / n) for s, n, hi in out]
    return lambda c: next((v for hi, v in steps if c <= hi), steps[-1][1])


def main(argv=None) -> None:
    data = {}
    for arg in argv if argv is not None else sys.argv[1:]:
        corpus, ref = arg.split("=", 1)
        truth = {}
        for line in open(ref):
            r = json.loads(line)
            truth[r["id"]] = r["reference_first_error"]
        rows = [r for r in _rows(corpus, True) if r["rollouts"] and r["first_error_confidence"] is not None]
        data[corpus] = [(r["first_error_confidence"], int(r["first_error"] == truth[r["id"]])) for r in rows]
    print("| left-out corpus | rows | raw ECE | Platt (fitted on the others) | isotonic (fitted on the others) |")
    print("|---|---:|---:|---:|---:|")
    for k, pairs in data.items():
        train = [p for j, ps in data.items() if j != k for p in ps]
        fp, fi = platt(train), isotonic(train)
        print(f"| {k} | {len(pairs)} | {ece(pairs):.3f} | {ece([(fp(c), y) for c, y in pairs]):.3f} | "
              f"{ece([(fi(c), y) for c, y in pairs]):.3f} |")


if __name__ == "__main__":
    main()
