#!/usr/bin/env python3
"""Strategies against the exact checker (issue 5): rollouts, tokens and time per solution next to label quality.

On fresh synthetic problems (a seed the model never trained on), one solution per problem is sampled from the
bundled model at temperature 1.0; then every strategy labels the same solutions at K = 4, 8, 16 through the
real pipeline (``pipeline.run.label``, in-process executor, hf backend) and ``pipeline.commands.evaluate`` scores them
against the exact checker. Prints a table; ``--json`` writes the rows too.

    python bench/bench_strategies.py --solutions 300            # ~15-25 min on 2 CPU cores
    python bench/bench_strategies.py --solutions 60 --ks 4
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def sample_solutions(n: int, seed: int, path: Path) -> dict:
    from pipeline.bundled.synthetic import check_steps, generate_problems
    from pipeline.commands.generate import generate
    from pipeline.config import LabelConfig

    probs = generate_problems(n, seed=seed)
    pin = path.parent / "problems.jsonl"
    pin.write_text("".join(json.dumps({"id": p["id"], "problem": p["problem"], "answer": p["answer"]}) + "\n"
                           for p in probs))
    cfg = LabelConfig(input=[str(pin)], output=str(path), seed=seed, max_new_tokens=160)
    res = generate(cfg, n=1)
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    errs = [check_steps(r["problem"], r["steps"]).first_error for r in rows]
    return {"solutions": res.solutions, "with_error": sum(e != -1 for e in errs), "seconds": res.seconds}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--solutions", type=int, default=300)
    ap.add_argument("--ks", default="4,8,16")
    ap.add_argument("--strategies", default="per-step,binary-search,adaptive")
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    ap.add_argument("--executor", default="ray")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    from pipeline.commands.evaluate import evaluate
    from pipeline.config import LabelConfig
    from pipeline.run import label

    tmp = Path(tempfile.mkdtemp(prefix="mcprm-bench-strat-"))
    sols = tmp / "solutions.jsonl"
    info = sample_solutions(a.solutions, a.seed, sols)
    print(f"sampled {info['solutions']} solutions from the bundled model ({info['with_error']} with an error "
          f"per the exact checker) in {info['seconds']:.0f} s", flush=True)
    rows = []
    for k in [int(x) for x in a.ks.split(",")]:
        for strategy in a.strategies.split(","):
            out = tmp / f"{strategy}-k{k}"
            cfg = LabelConfig(input=[str(sols)], output=str(out), strategy=strategy, k=k, executor=a.executor,
                              num_workers=a.workers, progress=False, max_new_tokens=160, shard_size=25)
            t = time.perf_counter()
            label(cfg)
            dt = time.perf_counter() - t
            m = evaluate(str(out), "synthetic")
            n = m["solutions"]
            rows.append({"strategy": strategy, "k": k, "solutions": n, "rollouts_per_sol": m["rollouts"] / n,
                         "tokens_per_sol": m["rollout_tokens"] / n, "seconds_per_sol": dt / n, "f1": m["f1"],
                         "acc_error": m["acc_error"], "acc_correct": m["acc_correct"],
                         "step_accuracy": m["step_accuracy"], "brier": m["brier"], "rollout_tokens": m["rollout_tokens"]})
            r = rows[-1]
            print(f"  done {strategy} K={k}: f1={r['f1']:.3f} tokens/sol={r['tokens_per_sol']:.0f} ({dt:.0f} s)",
                  flush=True)
    print(f"\n{'strategy':14} {'K':>3} {'rollouts/sol':>12} {'tokens/sol':>10} {'tok vs per-step':>15} "
          f"{'s/sol':>7} {'F1':>6} {'acc_err':>7} {'acc_ok':>7} {'step_acc':>8} {'brier':>6}")
    for r in rows:
        ref = next(x for x in rows if x["k"] == r["k"] and x["strategy"] == "per-step") \
            if any(x["strategy"] == "per-step" and x["k"] == r["k"] for x in rows) else r
        ratio = r["tokens_per_sol"] / ref["tokens_per_sol"] if ref["tokens_per_sol"] else float("nan")
        brier = "n/a" if r["brier"] is None else f"{r['brier']:.3f}"
        print(f"{r['strategy']:14} {r['k']:3d} {r['rollouts_per_sol']:12.1f} {r['tokens_per_sol']:10.0f} "
              f"{ratio:15.2f} {r['seconds_per_sol']:7.3f} {r['f1']:6.3f} {r['acc_error']:7.3f} "
              f"{r['acc_correct']:7.3f} {r['step_accuracy']:8.3f} {brier:>6}")
    if a.json:
        Path(a.json).write_text(json.dumps({"sample": info, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
