#!/usr/bin/env python3
"""Strategies against the exact checker (issue 5): rollouts, tokens and time per solution next to label quality.

On fresh synthetic problems (a seed the model never trained on), one solution per problem is sampled from the
bundled model at temperature 1.0; then every strategy labels the same solutions at K = 4, 8, 16 through the
real pipeline (``pipeline.run.label``, in-process executor, hf backend) and ``pipeline.commands.evaluate`` scores them
against the exact checker. Prints a table; ``--json`` writes the rows too.

    python bench/bench_strategies.py --solutions 300            # ~15-25 min on 2 CPU cores
    python bench/bench_strategies.py --solutions 60 --ks 4
    python bench/bench_strategies.py --solutions 150 --seeds 20261126,20261127 --ks 4,8 \
        --strategies per-step,adaptive,sequential --rules all   # issue 16: strategy x label rule, with SEs

With ``--rules`` every labeled corpus is also scored under each label rule (pipeline.labeling.rules), from the
same stored counts (no new rollouts); with several ``--seeds`` the solutions of every seed are pooled (one
corpus per seed, metrics over the union). Standard errors: pipeline.commands.evaluate._standard_errors.

Issue 16's frontier (every strategy x rule at K = 4..64 on 1,440 solutions) is measured by replaying recorded
rollouts instead, which costs one per-step pass per seed: bench/frontier_cache.py and bench/bench_frontier.py.
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
    from pipeline.bundled.generator import generate_problems
    from pipeline.bundled.synthetic import check_steps
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
    ap.add_argument("--seeds", default=None, help="comma-separated problem seeds (pooled); overrides --seed")
    ap.add_argument("--rules", default=None, help="label rules to score each corpus under ('all': every rule)")
    ap.add_argument("--max-tokens-per-solution", type=int, default=None, help="sequential: token budget")
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    ap.add_argument("--executor", default="ray")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    from pipeline.commands.evaluate import evaluate
    from pipeline.config import LabelConfig
    from pipeline.labeling.rules import RULES
    from pipeline.run import label

    rules = [None] + (list(RULES) if a.rules == "all" else a.rules.split(",") if a.rules else [])
    tmp = Path(tempfile.mkdtemp(prefix="mcprm-bench-strat-"))
    seeds = [int(x) for x in (a.seeds or str(a.seed)).split(",")]
    sol_files = []
    for seed in seeds:
        sols = tmp / f"solutions-{seed}.jsonl"
        info = sample_solutions(a.solutions, seed, sols)
        sol_files.append((seed, sols))
        print(f"seed {seed}: sampled {info['solutions']} solutions from the bundled model ({info['with_error']} with "
              f"an error per the exact checker) in {info['seconds']:.0f} s", flush=True)
    rows = []
    for k in [int(x) for x in a.ks.split(",")]:
        for strategy in a.strategies.split(","):
            outs, dt = [], 0.0
            for seed, sols in sol_files:
                out = tmp / f"{strategy}-k{k}-s{seed}"
                cfg = LabelConfig(input=[str(sols)], output=str(out), strategy=strategy, k=k, executor=a.executor,
                                  num_workers=a.workers, progress=False, max_new_tokens=160, shard_size=25,
                                  max_tokens_per_solution=a.max_tokens_per_solution if strategy == "sequential"
                                  else None)
                t = time.perf_counter()
                label(cfg)
                dt += time.perf_counter() - t
                outs.append(out)
            for rule in rules:
                m = pooled([evaluate(str(o), "synthetic", label_rule=rule) for o in outs])
                n = m["solutions"]
                rows.append({"strategy": strategy, "rule": rule or "stored", "k": k, "solutions": n,
                             "rollouts_per_sol": m["rollouts"] / n, "tokens_per_sol": m["rollout_tokens"] / n,
                             "seconds_per_sol": dt / n, **{x: m[x] for x in METRICS}})
            r = rows[-len(rules)]
            print(f"  done {strategy} K={k}: f1={r['f1']:.3f} tokens/sol={r['tokens_per_sol']:.0f} ({dt:.0f} s)",
                  flush=True)

    def f(v, se=None):
        return "n/a" if v is None else f"{v:.3f}" + ("" if se is None else f"±{se:.3f}")

    print(f"\n{'strategy':14} {'rule':12} {'K':>3} {'tokens/sol':>13} {'tok/ps':>6} {'F1':>12} {'acc_err':>7} "
          f"{'acc_ok':>7} {'step_acc':>12} {'brier':>12}")
    for r in rows:
        ref = next((x for x in rows if x["k"] == r["k"] and x["strategy"] == "per-step"), r)
        ratio = r["tokens_per_sol"] / ref["tokens_per_sol"] if ref["tokens_per_sol"] else float("nan")
        print(f"{r['strategy']:14} {r['rule']:12} {r['k']:3d} {f(r['tokens_per_sol'], r['tokens_per_solution_se'])[:-4]:>13} "
              f"{ratio:6.2f} {f(r['f1'], r['f1_se']):>12} {f(r['acc_error']):>7} {f(r['acc_correct']):>7} "
              f"{f(r['step_accuracy'], r['step_accuracy_se']):>12} {f(r['brier'], r['brier_se']):>12}")
    if a.json:
        Path(a.json).write_text(json.dumps({"seeds": seeds, "rows": rows}, indent=2))


METRICS = ("f1", "f1_se", "acc_error", "acc_correct", "step_accuracy", "step_accuracy_se", "brier", "brier_se",
           "tokens_per_solution_se", "rollout_tokens")


def pooled(ms: list[dict]) -> dict:
    """Metrics over the union of several corpora's solutions (one per seed), from their counts."""
    if len(ms) == 1:
        return ms[0]
    import math

    out = {"solutions": sum(m["solutions"] for m in ms), "rollouts": sum(m["rollouts"] for m in ms),
           "rollout_tokens": sum(m["rollout_tokens"] for m in ms)}
    n_err = sum(m["solutions_with_error"] for m in ms)
    n_ok = out["solutions"] - n_err
    ae = sum(m["acc_error"] * m["solutions_with_error"] for m in ms if m["acc_error"] is not None) / n_err
    ac = sum(m["acc_correct"] * (m["solutions"] - m["solutions_with_error"]) for m in ms
             if m["acc_correct"] is not None) / n_ok
    sn = sum(m["steps_compared"] for m in ms)
    sa = sum(m["step_accuracy"] * m["steps_compared"] for m in ms if m["step_accuracy"] is not None) / sn
    from pipeline.commands.evaluate import _standard_errors

    se = _standard_errors(ae, n_err, ac, n_ok, sa, sn, 0.0, 0.0, 0, 0, 0.0, 0)
    briers = [m for m in ms if m["brier"] is not None]
    out.update({"acc_error": ae, "acc_correct": ac, "f1": 0.0 if ae + ac == 0 else 2 * ae * ac / (ae + ac),
                "f1_se": se["f1_se"], "step_accuracy": sa, "step_accuracy_se": se["step_accuracy_se"],
                "brier": sum(m["brier"] for m in briers) / len(briers) if briers else None,
                "brier_se": (math.sqrt(sum(m["brier_se"] ** 2 for m in briers)) / len(briers)
                             if briers and all(m["brier_se"] is not None for m in briers) else None),
                "tokens_per_solution_se": math.sqrt(sum((m["tokens_per_solution_se"] or 0) ** 2
                                                        * m["solutions"] ** 2 for m in ms)) / out["solutions"]})
    return out


if __name__ == "__main__":
    main()
