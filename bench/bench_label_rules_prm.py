"""Which labels make the best PRM, on the bundled task where the truth is exact.

PRMs trained from the bundled model on the same labeled corpus under different labels, each measured by its
first-error F1 on a fresh synthetic sample (``data/make_sample.py --seed 28028``: problems and solutions no part
of the repository uses), against the exact checker (``pipeline.bundled.synthetic.check_steps``):

* ``hard`` / ``soft`` / ``ratio`` (or ``relative`` where the ratio rule is absent) / ``advantage`` /
  ``changepoint``: the rules of :mod:`pipeline.labeling.rules` on the stored Monte Carlo counts (soft: the rule's
  score as a soft target; the others hard targets);
* ``hard, conf>=C``: hard labels, rows whose first-error confidence is below C left out;
* ``exact``: the checker's own labels of the training solutions (the ceiling: what perfect labels give);
* ``outcome``: every step labeled with the solution's final answer (an ORM's labels, the floor).

Each PRM's threshold is chosen on its validation problems against its own labels (as ``mcprm train`` does; the
exact PRM's against exact labels); the table also gives F1 at 0.5. The Monte Carlo labels' own F1 on the fresh
sample is printed when ``--fresh-corpus`` (the fresh sample labeled by ``mcprm label``) is given.

    python data/make_sample.py --seed 28028 --out-dir /tmp/fresh
    mcprm label --output /tmp/corpus                       # the default corpus (bundled sample)
    mcprm label --input /tmp/fresh/sample.jsonl --output /tmp/fresh-mc   # optional: MC labels' F1 on it
    python bench/bench_label_rules_prm.py --corpus /tmp/corpus --fresh /tmp/fresh/sample.jsonl \\
        --fresh-corpus /tmp/fresh-mc
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.bundled.synthetic import check_steps  # noqa: E402
from pipeline.training.metrics import first_error_at, first_error_f1  # noqa: E402


def f1_se(m: dict) -> float | None:
    """Delta-method SE of the F1 (the two accuracies binomial, from disjoint solutions), as ``mcprm eval``."""
    e, c = m["acc_error"], m["acc_correct"]
    ne, nc = m["solutions_with_error"], m["solutions"] - m["solutions_with_error"]
    if e is None or c is None or not ne or not nc or e + c == 0:
        return None
    se_e, se_c = math.sqrt(e * (1 - e) / ne), math.sqrt(c * (1 - c) / nc)
    d = (e + c) ** 2
    return math.sqrt((2 * c * c / d * se_e) ** 2 + (2 * e * e / d * se_c) ** 2)


def exact_targets(row: dict):
    fe = check_steps(row["problem"], list(row["steps"])).first_error
    n = len(row["steps"])
    t = [1.0] * n if fe == -1 else [1.0] * fe + [0.0] + [None] * (n - fe - 1)
    return t, fe, 1.0


def variants(min_conf: float) -> list[tuple[str, dict, object]]:
    from pipeline.labeling.rules import RULES

    rel = "ratio" if "ratio" in RULES else "relative"
    return [
        ("hard", {"label_rule": "hard"}, None),
        ("soft", {"label_rule": "soft", "targets": "soft"}, None),
        (rel, {"label_rule": rel}, None),
        ("advantage", {"label_rule": "advantage"}, None),
        ("changepoint", {"label_rule": "changepoint"}, None),
        (f"hard, conf>={min_conf:g}", {"label_rule": "hard", "min_confidence": min_conf}, None),
        ("exact (ceiling)", {"label_rule": "hard"}, exact_targets),
        ("outcome (ORM floor)", {"label_rule": "outcome"}, None),
    ]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="labeled corpus of the bundled task (mcprm label)")
    ap.add_argument("--fresh", required=True, help="fresh synthetic solutions (data/make_sample.py --seed 28028)")
    ap.add_argument("--fresh-corpus", help="the fresh sample labeled by mcprm label (for the MC labels' F1)")
    ap.add_argument("--epochs", type=float, default=None, help="default: mcprm train's (10 for the bundled model)")
    ap.add_argument("--min-confidence", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", help="variant names to run (prefix match)")
    ap.add_argument("--keep", help="folder to keep the PRMs in (default: a temporary one)")
    a = ap.parse_args(argv)

    from pipeline.training.score import load_prm, predict_probs
    from pipeline.training.train import TrainConfig, train

    fresh = [json.loads(x) for x in Path(a.fresh).read_text().splitlines() if x.strip()]
    truth = [check_steps(r["problem"], r["steps"]).first_error for r in fresh]
    items = [(r["problem"], r["steps"]) for r in fresh]
    root = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench-prm-"))
    rows = []
    for name, opts, fn in variants(a.min_confidence):
        if a.only and not any(name.startswith(o) for o in a.only):
            continue
        out = root / name.split(" ")[0].replace(",", "")
        t0 = time.time()
        res = train(TrainConfig(corpus=a.corpus, output=str(out), epochs=a.epochs, seed=a.seed, progress=False,
                                overwrite=True, **{"kind": "head", "weight_by_confidence": False, **opts}),
                    targets_fn=fn)  # the head kind, unweighted, as the recorded row (BENCHMARKS.md, "PRM training and best-of-N")
        prm = load_prm(str(out), device="cpu")
        probs = predict_probs(prm.model, prm.tokenizer, prm.fmt, prm.sep_id, items)
        m = first_error_f1([first_error_at(p, prm.threshold) for p in probs], truth)
        m05 = first_error_f1([first_error_at(p, 0.5) for p in probs], truth)
        d = res.card["data"]
        rows.append({"variant": name, "f1": m["f1"], "f1_se": f1_se(m), "acc_error": m["acc_error"],
                     "acc_correct": m["acc_correct"], "f1_at_0.5": m05["f1"], "threshold": prm.threshold,
                     "train_rows": d["train_rows"], "train_steps": d["train_steps"],
                     "skipped": sum(d["skipped"].values()), "seconds": round(time.time() - t0, 1)})
        print(json.dumps(rows[-1]), flush=True)
    mc = None
    if a.fresh_corpus:
        from pipeline.commands.evaluate import evaluate

        mc = evaluate(a.fresh_corpus, "synthetic")
    lines = table(rows, mc, len(fresh), sum(t != -1 for t in truth))
    print("\n".join(lines))


def table(rows, mc, n, n_err) -> list[str]:
    def f(x, se=None):
        if x is None:
            return "n/a"
        return f"{x:.3f}" + (f" ± {se:.3f}" if se is not None else "")

    out = ["| labels the PRM was trained on | first-error F1 | acc_error | acc_correct | F1 at 0.5 | threshold "
           "| train rows (steps) |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['variant']} | {f(r['f1'], r['f1_se'])} | {f(r['acc_error'])} | {f(r['acc_correct'])} | "
                   f"{f(r['f1_at_0.5'])} | {r['threshold']:.2f} | {r['train_rows']} ({r['train_steps']}) |")
    if mc is not None:
        out.append(f"| *(the Monte Carlo labels themselves on the fresh sample, strategy {mc['strategy']}, "
                   f"K={mc['k']})* | {f(mc['f1'], mc.get('f1_se'))} | {f(mc['acc_error'])} | "
                   f"{f(mc['acc_correct'])} | | | |")
    out.append(f"\nFresh sample: {n} solutions, {n_err} with an error.")
    return out


if __name__ == "__main__":
    main()
