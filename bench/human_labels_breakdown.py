#!/usr/bin/env python3
"""Where label corpora win and lose against people: first-error F1 split by what the labeler could know.

``bench_human_labels.py`` prints one F1 per configuration. This reads the corpora it wrote (or any corpora of the
same solutions) with the human reference and splits each solution by two facts:

* the solution's own final answer: **right** or **wrong** against the gold answer. A labeler that trusts a right
  answer (``--trust-correct``, the default of every strategy but per-step) can never flag an error in a
  right-answer solution, so the right-answer solutions with a human error are its hard ceiling;
* whether the completer **reaches** the gold answer from the first step at all: a per-step corpus (``--reach``)
  gives every solution's successes after step 1. Where that is 0 of K the model cannot solve the problem from the
  start, so every Monte Carlo label of the solution reads "step 1 is wrong" whatever the steps say: those labels
  carry no evidence about the steps, only about the completer.

    python bench/human_labels_breakdown.py --reference WORK/dev/reference.jsonl --reach WORK/dev/per-step-k8 \\
        WORK/dev/per-step-k8 WORK/dev/defaults WORK/dev/no-trust

Prints one table: per corpus, F1, exact first errors on wrong-answer and on right-answer erroneous solutions,
error flags on correct solutions, and the same counts within the solutions the completer cannot reach.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def read_reference(path: str) -> dict[str, int]:
    """``id`` -> the human first error (-1 = none), from a reference JSONL (``label`` or ``first_error``)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            label = row.get("label", row.get("first_error"))
            if "id" not in row or label is None:
                raise SystemExit(f"{path}:{n}: a reference row needs 'id' and 'label' (the human first error)")
            out[str(row["id"])] = int(label)
    return out


def read_labels(corpus: str) -> dict[str, dict]:
    """``id`` -> first_error, solution_correct and the successes/draws after step 1, from a committed corpus."""
    from pipeline.storage.corpus import read_corpus

    t = read_corpus(corpus, columns=["id", "first_error", "solution_correct", "mc_correct", "mc_total"])
    out = {}
    for r in t.to_pylist():
        mc, tot = r["mc_correct"] or [], r["mc_total"] or []
        out[str(r["id"])] = {"first_error": int(r["first_error"]), "solution_correct": r["solution_correct"],
                             "first_step": (mc[0], tot[0]) if mc and tot and tot[0] else None}
    return out


def unreached(reach: dict[str, dict]) -> set[str]:
    """Solutions whose first-step prefix never reached the gold answer in the reach corpus (0 of K > 0)."""
    return {i for i, r in reach.items() if r["first_step"] is not None and r["first_step"][0] == 0}


def breakdown(labels: dict[str, dict], ref: dict[str, int], dead: set[str]) -> dict:
    """The counts of one corpus on the solutions it shares with the reference (see the module text)."""
    from pipeline.training.metrics import first_error_f1

    ids = sorted(set(labels) & set(ref))
    if not ids:
        raise SystemExit("no solution of the corpus is in the reference (do the ids match?)")
    m = first_error_f1([labels[i]["first_error"] for i in ids], [ref[i] for i in ids])

    def count(pred) -> int:
        return sum(1 for i in ids if pred(i))

    def hit(i):
        return ref[i] != -1 and labels[i]["first_error"] == ref[i]

    def right(i):
        return bool(labels[i]["solution_correct"])

    def flag(i):
        return ref[i] == -1 and labels[i]["first_error"] != -1

    return {
        "solutions": len(ids), "f1": m["f1"], "acc_error": m["acc_error"], "acc_correct": m["acc_correct"],
        "errors_wrong_answer": count(lambda i: ref[i] != -1 and not right(i)),
        "hit_wrong_answer": count(lambda i: hit(i) and not right(i)),
        "errors_right_answer": count(lambda i: ref[i] != -1 and right(i)),
        "hit_right_answer": count(lambda i: hit(i) and right(i)),
        "correct": count(lambda i: ref[i] == -1), "flags_on_correct": count(flag),
        "unreached": count(lambda i: i in dead),
        "hit_unreached": count(lambda i: i in dead and hit(i)),
        "flags_on_correct_unreached": count(lambda i: i in dead and flag(i)),
    }


def table(rows: list[tuple[str, dict]]) -> str:
    lines = ["| corpus | F1 | exact, wrong-answer errors | exact, right-answer errors | flags on correct "
             "| unreached solutions | exact there | flags on correct there |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, b in rows:
        f1 = "n/a" if b["f1"] is None else f"{b['f1']:.3f}"
        lines.append(f"| {name} | {f1} | {b['hit_wrong_answer']} / {b['errors_wrong_answer']} "
                     f"| {b['hit_right_answer']} / {b['errors_right_answer']} "
                     f"| {b['flags_on_correct']} / {b['correct']} | {b['unreached']} / {b['solutions']} "
                     f"| {b['hit_unreached']} | {b['flags_on_correct_unreached']} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpora", nargs="+", help="committed corpora of the same solutions")
    ap.add_argument("--reference", required=True, help="JSONL with id and label (the human first error)")
    ap.add_argument("--reach", help="a per-step corpus of the same solutions: which ones the completer cannot "
                                    "reach from step 1 (default: the first corpus)")
    ap.add_argument("--json", action="store_true", help="one JSON line per corpus instead of the table")
    a = ap.parse_args(argv)
    ref = read_reference(a.reference)
    dead = unreached(read_labels(a.reach or a.corpora[0]))
    rows = [(Path(c).name, breakdown(read_labels(c), ref, dead)) for c in a.corpora]
    if a.json:
        for name, b in rows:
            print(json.dumps({"corpus": name, **b}))
    else:
        print(table(rows))


if __name__ == "__main__":
    main()
