"""Coverage of the corpus's 95% intervals and bias of its ``mc_value``, per strategy, by simulation.

Each strategy's real generator (``pipeline.labeling.strategies``) is driven with Bernoulli draws of known
success probabilities; the rows are built by the real row builder (``pipeline.storage.schema.to_record``), and
each step's stored ``mc_low``/``mc_high``/``mc_value`` is compared with the true p of that step. Solutions have
6 steps; every sampled prefix has the same true p (so a binary-search probe lands anywhere); the own answer is
wrong, so every strategy samples. Fresh draws per run (``--seed``).

    python bench/bench_intervals.py --solutions 3000 --seed 1
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.labeling.strategies import ProbeResult, StrategyParams, make_strategy, row_extra  # noqa: E402
from pipeline.solution import LabeledSolution, Solution  # noqa: E402
from pipeline.storage.schema import to_record  # noqa: E402

P_GRID = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
STRATEGIES = {
    "per-step K=8": ("per-step", StrategyParams(k=8)),
    "binary-search (defaults)": ("binary-search", StrategyParams()),
    "binary-search --no-early-stop": ("binary-search", StrategyParams(early_stop=False, k=8)),
    "adaptive K=20": ("adaptive", StrategyParams(k=20)),
    "sequential K=20": ("sequential", StrategyParams(k=20)),
}


def simulate(strategy: str, params: StrategyParams, p: float, n: int, rng: random.Random, steps: int = 6):
    """(covered, steps with an interval, sum of mc_value, steps with a value) over ``n`` solutions."""
    covered = with_iv = valued = 0
    vsum = 0.0
    sol = Solution(id="s", problem="p", answer="1", steps=tuple(f"s{i}" for i in range(steps)))
    for _ in range(n):
        gen = make_strategy(strategy, steps, False, params)
        try:
            probes = next(gen)
            while True:
                res = []
                for pr in probes:
                    c = sum(rng.random() < p for _ in range(pr.n))
                    res.append(ProbeResult(pr.step, pr.n, c, 0, 10 * pr.n))
                probes = gen.send(res)
        except StopIteration as stop:
            oc = stop.value
        ls = LabeledSolution(sol, oc.labels, oc.stats, oc.first_error, False, rollouts=1, strategy=strategy,
                             extra=row_extra(oc, params))
        rec = to_record(ls, params.k)
        for i in range(steps - 1):
            lo, hi, v = rec["mc_low"][i], rec["mc_high"][i], rec["mc_value"][i]
            if lo is not None:
                with_iv += 1
                covered += lo <= p <= hi
            if v is not None:
                valued += 1
                vsum += v
    return covered, with_iv, vsum, valued


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--solutions", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    rng = random.Random(a.seed)
    print("| strategy (design) | " + " | ".join(f"p={p}" for p in P_GRID) + " | min coverage |")
    print("|---|" + "---:|" * (len(P_GRID) + 1))
    bias_rows = []
    for name, (strategy, params) in STRATEGIES.items():
        cells, worst, bias = [], 1.0, []
        for p in P_GRID:
            cov, n_iv, vsum, n_v = simulate(strategy, params, p, a.solutions, rng)
            c = cov / n_iv if n_iv else float("nan")
            worst = min(worst, c)
            cells.append(f"{c:.3f}")
            bias.append(f"{(vsum / n_v) / p:.2f}" if n_v else "n/a")
        print(f"| {name} | " + " | ".join(cells) + f" | **{worst:.3f}** |")
        bias_rows.append((name, bias))
    print("\nmean mc_value / true p (1.00 = unbiased):\n")
    print("| strategy | " + " | ".join(f"p={p}" for p in P_GRID) + " |")
    print("|---|" + "---:|" * len(P_GRID))
    for name, bias in bias_rows:
        print(f"| {name} | " + " | ".join(bias) + " |")


if __name__ == "__main__":
    main()
