#!/usr/bin/env python3
"""A CPU replay of reach-gated labeling on the draws of a stored per-step corpus: F1 and expected tokens against
per-step itself, on the same solutions and the same continuations. A replay, not a held-out measurement: the
draws are the per-step run's, and the trust threshold is chosen on one half of the solutions (a hash of the id)
and read on the other.

The per-step corpus holds K draws of every prefix but the last (a fixed batch each). The replay runs the gate of
``pipeline.labeling.strategies.reach_gated`` on them, with what they cannot give replaced as follows:

* there is no bare-problem probe in a per-step corpus: the pass rate is step 1's K draws' success rate, and a
  row is unreached when no prefix the search probed (step 1 first) had a success;
* the binary search (bisect fraction 0.6, any success = alive; without the relative drop and speculation) reads
  a probed prefix as alive when any of its K draws succeeded: the decision a first-success probe of the same K
  draws makes. Its cost is the expected number of draws that probe would have drawn (waves 2, 4, 2 for K=8,
  stopping at the first success, with the draws in a random order), each priced by the prefix it continues
  (:func:`draw_weights`: what is left of the solution to write, scaled to the row's stored tokens);
* a right-answer solution's full prefix (never sampled by per-step) is alive (the solution itself reached).

    python bench/replay_reach_gate.py PER_STEP_CORPUS REFERENCE.jsonl

Prints one table: per design (per-step; the gate with an unreached row's claim as stored, "answer", or step 1
on every unreached row, "step1"; trust at each threshold, or never), F1 with its 95%
bootstrap interval, the paired difference from per-step, expected tokens as a share of per-step's, and the rows
left unreached; first on the half that chose the threshold, then on the other half.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

THRESHOLDS = (0.0, 0.125, 0.25, 0.5, 0.75, 1.0)  # trust a right answer from this step-1 pass rate on
WAVES = (2, 2.0)  # wave size and growth of the replayed probes (the defaults, pipeline.labeling.strategies)
FRACTION = 0.6  # the binary search's probe point (pipeline.labeling.strategies.DEFAULT_BISECT_FRACTION)


def _breakdown():
    spec = importlib.util.spec_from_file_location("human_labels_breakdown", ROOT / "bench" / "human_labels_breakdown.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def expected_draws(c: int, k: int) -> float:
    """Expected draws of a first-success probe with waves 2, 4, ... up to ``k`` when ``c`` of the ``k`` draws
    (in a random order) succeed."""
    from pipeline.stats.intervals import next_wave

    if c == 0:
        return float(k)
    ends, done = [], 0
    while done < k:
        done += min(next_wave(done, WAVES[0], WAVES[1]), k - done)
        ends.append(done)
    total = math.comb(k, c)
    out, prev = 0.0, 0
    for e in ends:  # the probe stops at the first wave end at or past the first success
        p_first_after_prev = math.comb(k - prev, c) / total  # P(first success > prev)
        p_first_after_e = math.comb(k - e, c) / total if k - e >= c else 0.0
        out += e * (p_first_after_prev - p_first_after_e)
        prev = e
    return out


@functools.cache  # called for every row of every design with a handful of distinct arguments
def expected_trust_draws(c: int, k: int, need: int) -> float:
    """Expected draws of a step-1 probe that stops at the first wave end (waves 2, 4, ... up to ``k``) where its
    trust question is settled: ``need`` successes reached (trust) or more than ``k - need`` failures (no trust,
    and alive or dead known once it has a success or all ``k`` failed), when ``c`` of the ``k`` draws (in a
    random order) succeed."""
    import itertools

    from pipeline.stats.intervals import next_wave

    ends, done = [], 0
    while done < k:
        done += min(next_wave(done, WAVES[0], WAVES[1]), k - done)
        ends.append(done)
    orders = list(itertools.combinations(range(k), c))
    total = 0.0
    for pos in orders:
        hit = set(pos)
        for e in ends:
            s = sum(1 for i in range(e) if i in hit)
            f = e - s
            if s >= need or (f > k - need and (s > 0 or e == k)):
                total += e
                break
        else:
            total += k
    return total / len(orders)


def _probe(lo: int, hi: int) -> int:
    return lo + max(1, min(hi - lo - 1, math.ceil(FRACTION * (hi - lo) - 0.5)))


def draw_weights(row: dict) -> tuple[list[float], float]:
    """Tokens per draw at each prefix of ``row`` and from the bare problem, priced by what is left to write.

    A continuation from prefix ``i`` writes roughly the rest of the solution, so its expected length is taken as
    proportional to the characters of the steps after ``i`` plus one mean step (the answer's tail), scaled so that
    per-step's own draws add up to the row's stored ``rollout_tokens``. The bare problem's draw writes the whole
    solution. Pricing every draw at the row's mean instead (this script's first version) made early probes, a
    binary search's usual ones, look as cheap as late ones: on ProcessBench-MATH its 0.32x of per-step's tokens
    was 0.73x in a real gated run."""
    steps = [len(x) for x in (row.get("steps") or [])]
    own_n = [n - r for n, r in zip(row["mc_total"], row["mc_reused"])]
    m = len(own_n)
    if len(steps) != m or not steps:
        per = row["rollout_tokens"] / row["rollouts"] if row["rollouts"] else 0.0
        return [per] * m, per
    tail = sum(steps) / m
    w = [sum(steps[i + 1 :]) + tail for i in range(m)]
    spent = sum(n * wi for n, wi in zip(own_n, w))
    scale = row["rollout_tokens"] / spent if spent > 0 else 0.0
    return [wi * scale for wi in w], (sum(steps) + tail) * scale


def replay(row: dict, threshold: float | None, claim: str = "answer", step1_probe: str = "full",
           prices: tuple[list[float], float] | None = None) -> tuple[int, float, bool]:
    """(first error, expected tokens, unreached) of the reach-gated design on one per-step row (bare-problem
    draws not included: :func:`main` adds them once per problem); ``threshold`` None: never trust a right
    answer. ``claim``: an unreached row's first error, "answer" (step 1 on a wrong answer, none on a right one:
    what reach_gated stores) or "step1" (step 1 on both, per-step's reading). ``step1_probe``: how step 1 is
    drawn, with the same decisions each way: "full" (all K), "fixed" (all K where a right answer may be trusted, a
    first-success probe otherwise: ``--reach-probe step1``) or "settled" (stopped once its question is settled,
    :func:`expected_trust_draws`, where a right answer may be trusted; a first-success probe otherwise)."""
    own_c = [c - rc for c, rc in zip(row["mc_correct"], row["mc_reused_correct"])]
    own_n = [n - r for n, r in zip(row["mc_total"], row["mc_reused"])]
    m, right = len(own_c), bool(row["solution_correct"])
    last = m - 1
    if m == 1:
        return (-1 if right else 0), 0.0, False
    price, _ = prices or draw_weights(row)
    c0, n0 = own_c[0], own_n[0]
    trusting = right and threshold is not None
    if not n0:
        step1 = 0.0
    elif step1_probe == "full" or (step1_probe == "fixed" and trusting):
        step1 = float(n0)
    elif step1_probe == "settled" and trusting:
        step1 = expected_trust_draws(c0, n0, max(1, math.ceil(threshold * n0 - 1e-9)))
    else:
        step1 = expected_draws(c0, n0)
    if right and threshold is not None and n0 and c0 / n0 >= threshold:
        return -1, step1 * price[0], False  # the pass rate is read from step 1's draws
    draws = step1 * price[0]
    # step 1 dead: the search goes on from the bare problem (no bare-problem draws here: step 1's stand in), and
    # the row is unreached only when no probed prefix reached the answer
    lo, hi = (0, (m if right else last)) if c0 or not n0 else (-1, (m if right else last))
    reached = c0 > 0 or not n0
    while hi - lo > 1:
        mid = _probe(lo, hi)
        if mid == last:  # the full solution: alive when its answer is right (never sampled by per-step)
            alive = right
        elif mid == 0:  # step 1, already drawn
            alive = c0 > 0
        else:
            alive = own_c[mid] > 0 or own_n[mid] == 0
            draws += expected_draws(own_c[mid], own_n[mid]) * price[mid] if own_n[mid] else 0.0
        reached = reached or (alive and mid != last)
        lo, hi = (mid, hi) if alive else (lo, mid)
    if not reached:
        return (-1 if right and claim == "answer" else 0), draws, True
    return (-1 if hi >= m else hi), draws, False


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", help="a per-step corpus (every prefix but the last sampled K times)")
    ap.add_argument("reference", help="JSONL with id and label (the human first error)")
    a = ap.parse_args(argv)
    from pipeline.corpus import read_corpus

    bd = _breakdown()
    ref = bd.read_reference(a.reference)
    rows = [r for r in read_corpus(a.corpus, columns=["id", "problem", "steps", "first_error", "solution_correct",
                                                      "mc_correct", "mc_total", "mc_reused", "mc_reused_correct",
                                                      "rollouts", "rollout_tokens"]).to_pylist()
            if str(r["id"]) in ref]
    designs = [("per-step", "ps", "", False, "full")]
    for claim in ("answer", "step1"):
        designs += [(f"gate ({claim}), trust from {t:.3f}", t, claim, False, "full") for t in THRESHOLDS]
        designs += [(f"gate ({claim}), no trust", None, claim, False, "full")]
    # the gate as built: K draws of the bare problem per problem (shared by its solutions) on top
    designs += [(f"gate ({claim}) + bare problem, trust from 0.500", 0.5, claim, True, "full")
                for claim in ("answer", "step1")]
    # no bare problem: step 1 drawn in full only where a right answer may be trusted, or until settled there
    designs += [(f"gate ({claim}), step 1 {how}, trust from {t:.3f}", t, claim, False, how)
                for how in ("fixed", "settled") for claim in ("answer", "step1") for t in (0.25, 0.5)]
    for half in ("choose", "read"):
        mine = sorted((r for r in rows if bd.half_of(str(r["id"])) == half), key=lambda r: str(r["id"]))
        truth = [ref[str(r["id"])] for r in mine]
        base = [int(r["first_error"]) for r in mine]
        tokens_ps = sum(r["rollout_tokens"] for r in mine)
        prices = [draw_weights(r) for r in mine]  # once a row, for every design
        rs = bd._resamples(len(mine))
        print(f"\n{half} half: {len(mine)} solutions\n")
        print("| design | F1 [95%] | minus per-step [paired 95%] | tokens vs per-step | unreached |")
        print("|---|---:|---:|---:|---:|")
        for name, t, claim, bare, how in designs:
            if t == "ps":
                pred, tok, unr = base, tokens_ps, 0
            else:
                out = [replay(r, t, claim, how, pr) for r, pr in zip(mine, prices)]
                pred = [fe for fe, _, _ in out]
                tok = sum(d for _, d, _ in out)
                unr = sum(u for _, _, u in out)
                if bare:  # K draws per distinct problem, priced at the first of its solutions' whole length
                    first: dict[str, tuple[dict, float]] = {}
                    for r, pr in zip(mine, prices):
                        first.setdefault(r["problem"], (r, pr[1]))
                    tok += sum(max(r["mc_total"][:1] or [0]) * bare for r, bare in first.values())
            lo, hi = bd.f1_interval(pred, truth, rs)
            d = bd.paired_difference(pred, base, truth, rs)
            print(f"| {name} | {bd._f1(pred, truth):.3f} [{lo:.3f}, {hi:.3f}] | {d[0]:+.3f} [{d[1]:+.3f}, "
                  f"{d[2]:+.3f}] | {tok / tokens_ps:.2f}x | {unr} |")


if __name__ == "__main__":
    main()
