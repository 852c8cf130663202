#!/usr/bin/env python3
"""Where label corpora win and lose against people: first-error F1, with intervals, split by what the labeler could
know.

``bench_human_labels.py`` prints one F1 per configuration. This reads the corpora it wrote (or any corpora of the
same solutions) with the human reference and splits each solution by two facts:

* the solution's own final answer: **right** or **wrong** against the gold answer. A labeler that trusts every
  right answer (``--trust-correct``, the default of every strategy but per-step) never flags an error in a
  right-answer solution, so the right-answer solutions with a human error are out of its reach (its F1 ceiling
  is printed);
* whether the completer **reached** the gold answer, measured on draws the scored corpora did not make
  (``--reach``): a ``--reach-gate`` corpus (its ``label_status`` "unreached": 0 of K from the bare problem and
  every prefix it probed), or a corpus labeled with **another seed** (0 of K after step 1). A split drawn from a scored
  corpus's own draws is not independent of it (its step-1 flags there are the split itself): such a corpus is
  marked "same draws". "0 of K" means 0 successes in K draws, not "cannot solve": the 95% upper bound of the
  pass rate after 0 of 8 is 0.37 (Clopper-Pearson).

    python bench/human_labels_breakdown.py --reference WORK/dev/reference.jsonl --reach WORK/dev/reach-seed2 \\
        WORK/dev/per-step-k8 WORK/dev/defaults WORK/dev/no-trust

Prints one table: per corpus, F1 with its 95% bootstrap interval (solutions resampled), the paired difference
from the first corpus with its interval (the same resampled solutions for both), the rollout tokens each spent on
the solutions every corpus holds (and as a ratio of the first's), exact first errors on
wrong-answer and on right-answer erroneous solutions, error flags on correct solutions, the same counts within
the unreached solutions, and the F1 ceiling of a labeler that trusts right answers.
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


BOOT = 2000  # bootstrap resamples of the solutions (a fixed generator: the same intervals on every run)


def read_labels(corpus: str) -> dict[str, dict]:
    """``id`` -> first_error, solution_correct, label_status and the successes/draws after step 1, from a
    committed corpus."""
    from pipeline.corpus import read_corpus

    cols = ["id", "first_error", "solution_correct", "mc_correct", "mc_total", "label_status", "rollout_tokens"]
    if (Path(corpus) / "versions").is_dir():
        t = read_corpus(corpus, columns=cols)
    else:
        t = read_unfinished(corpus, cols)
    out = {}
    for r in t.to_pylist():
        mc, tot = r["mc_correct"] or [], r["mc_total"] or []
        out[str(r["id"])] = {"first_error": int(r["first_error"]), "solution_correct": r["solution_correct"],
                             "first_step": (mc[0], tot[0]) if mc and tot and tot[0] else None,
                             "label_status": r["label_status"], "rollout_tokens": int(r["rollout_tokens"] or 0)}
    return out


def read_unfinished(corpus: str, columns: list[str]):
    """The finished shards of a run that was cut before it committed its version (a shard's summary is written
    after its Parquet file, so a shard with both is whole): comparable on the solutions they hold, which the
    paired columns restrict every corpus to. Said on stderr, with how many shards and rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = sorted(p for p in Path(corpus).glob("data/v*/part-*.parquet") if p.with_suffix(".sum.json").exists())
    if not parts:
        raise SystemExit(f"{corpus}: no committed version and no finished shard (is it an mcprm corpus?)")
    t = pa.concat_tables([pq.read_table(p, columns=columns) for p in parts])
    print(f"{corpus}: an unfinished run, {len(parts)} finished shards, {t.num_rows} solutions", file=sys.stderr)
    return t


def half_of(row_id: str) -> str:
    """``"choose"`` or ``"read"``: a fixed function of the id (bench/replay_reach_gate.py uses the same)."""
    import hashlib

    h = int.from_bytes(hashlib.blake2b(f"replay|{row_id}".encode(), digest_size=8).digest(), "big")
    return "choose" if h % 2 == 0 else "read"


def seed_of(corpus: str) -> int | None:
    """The labeling seed a corpus was written with (its manifest's config), None when it does not say."""
    try:
        m = json.load(open(Path(corpus) / "manifest.json"))
    except (OSError, ValueError):
        return None
    return (m.get("config") or {}).get("seed")


def unreached(reach: dict[str, dict]) -> set[str]:
    """The solutions the completer did not reach in the reach corpus: ``label_status`` "unreached" in a
    ``--reach-gate`` corpus (0 of K from the bare problem and every prefix it probed), else 0 of K > 0 after
    step 1."""
    from pipeline.solution import REACH_STATUSES, UNREACHED

    if any(r.get("label_status") in REACH_STATUSES for r in reach.values()):
        return {i for i, r in reach.items() if r.get("label_status") == UNREACHED}
    return {i for i, r in reach.items() if r["first_step"] is not None and r["first_step"][0] == 0}


def _f1(pred: list[int], truth: list[int]) -> float | None:
    from pipeline.training.metrics import first_error_f1

    return first_error_f1(pred, truth)["f1"]


def _resamples(n: int):
    import numpy as np

    rng = np.random.default_rng(20261201)
    return [rng.integers(0, n, n) for _ in range(BOOT)]


def f1_interval(pred: list[int], truth: list[int], resamples=None) -> tuple[float, float]:
    """95% percentile bootstrap interval of the first-error F1 (solutions resampled with replacement)."""
    import numpy as np

    vals = [v for idx in (resamples or _resamples(len(pred)))
            if (v := _f1([pred[i] for i in idx], [truth[i] for i in idx])) is not None]
    return float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))


def paired_difference(a: list[int], b: list[int], truth: list[int], resamples=None) -> tuple[float, float, float]:
    """F1(a) - F1(b) on the same solutions, and its 95% paired bootstrap interval (each resample scores both
    on the same solutions, so what they share cancels)."""
    import numpy as np

    diffs = []
    for idx in resamples or _resamples(len(a)):
        t = [truth[i] for i in idx]
        fa, fb = _f1([a[i] for i in idx], t), _f1([b[i] for i in idx], t)
        if fa is not None and fb is not None:
            diffs.append(fa - fb)
    return _f1(a, truth) - _f1(b, truth), float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))


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

    n_err, n_ok = sum(ref[i] != -1 for i in ids), sum(ref[i] == -1 for i in ids)
    # a labeler that trusts right answers misses every right-answer error: its best acc_error is the share of
    # errors in wrong-answer solutions (with every correct solution kept correct)
    ceil_e = count(lambda i: ref[i] != -1 and not right(i)) / n_err if n_err else None
    ceiling = None if ceil_e is None or not n_ok else 2 * ceil_e / (ceil_e + 1)
    return {
        "solutions": len(ids), "f1": m["f1"], "acc_error": m["acc_error"], "acc_correct": m["acc_correct"],
        "trust_ceiling_f1": ceiling,
        "errors_wrong_answer": count(lambda i: ref[i] != -1 and not right(i)),
        "hit_wrong_answer": count(lambda i: hit(i) and not right(i)),
        "errors_right_answer": count(lambda i: ref[i] != -1 and right(i)),
        "hit_right_answer": count(lambda i: hit(i) and right(i)),
        "correct": count(lambda i: ref[i] == -1), "flags_on_correct": count(flag),
        "unreached": count(lambda i: i in dead),
        "hit_unreached": count(lambda i: i in dead and hit(i)),
        "flags_on_correct_unreached": count(lambda i: i in dead and flag(i)),
    }


def intervals(labels: list[dict[str, dict]], ref: dict[str, int]) -> list[dict]:
    """Per corpus: its F1 interval and its paired difference from the first corpus (on the solutions every corpus
    and the reference share)."""
    ids = sorted(set(ref).intersection(*labels))
    truth = [ref[i] for i in ids]
    preds = [[lab[i]["first_error"] for i in ids] for lab in labels]
    tokens = [sum(lab[i].get("rollout_tokens", 0) for i in ids) for lab in labels]
    rs = _resamples(len(ids))
    out = []
    for k, p in enumerate(preds):
        lo, hi = f1_interval(p, truth, rs)
        d = None if k == 0 else paired_difference(p, preds[0], truth, rs)
        # the cost of the same solutions: a paired difference means little without what it was bought with
        ratio = tokens[k] / tokens[0] if tokens[0] else None
        out.append({"f1_low": lo, "f1_high": hi, "shared": len(ids), "diff": d, "tokens_shared": tokens[k],
                    "tokens_vs_first": ratio})
    return out


def table(rows: list[tuple[str, dict]], k: int | None = None) -> str:
    zero = f"0 of {k}" if k else "0 of K"
    lines = [f"| corpus | F1 [95%] | minus the first [paired 95%] | tokens (x the first) | exact, wrong-answer errors "
             f"| exact, right-answer errors | flags on correct | {zero} (reach corpus) | exact there "
             "| flags on correct there | trust ceiling F1 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, b in rows:
        f1 = "n/a" if b["f1"] is None else f"{b['f1']:.3f} [{b['f1_low']:.3f}, {b['f1_high']:.3f}]"
        d = b.get("diff")
        diff = "-" if d is None else f"{d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]"
        same = " (same draws)" if b.get("same_draws") else ""
        ceil = "n/a" if b["trust_ceiling_f1"] is None else f"{b['trust_ceiling_f1']:.3f}"
        tok = "n/a" if b.get("tokens_vs_first") is None else f"{b['tokens_shared']:,} ({b['tokens_vs_first']:.2f}x)"
        lines.append(f"| {name} | {f1} | {diff} | {tok} | {b['hit_wrong_answer']} / {b['errors_wrong_answer']} "
                     f"| {b['hit_right_answer']} / {b['errors_right_answer']} "
                     f"| {b['flags_on_correct']} / {b['correct']} | {b['unreached']} / {b['solutions']}{same} "
                     f"| {b['hit_unreached']} | {b['flags_on_correct_unreached']} | {ceil} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpora", nargs="+", help="committed corpora of the same solutions")
    ap.add_argument("--reference", required=True, help="JSONL with id and label (the human first error)")
    ap.add_argument("--reach", help="a corpus of the same solutions whose draws say which ones the completer did "
                                    "not reach: a --reach-gate corpus, or one labeled with another seed than the "
                                    "scored ones (default: the first corpus, marked 'same draws')")
    ap.add_argument("--half", choices=("choose", "read"), help="only one half of the solutions, by a hash of the "
                                                               "id: choose a setting on one, read it on the other")
    ap.add_argument("--json", action="store_true", help="one JSON line per corpus instead of the table")
    a = ap.parse_args(argv)
    ref = read_reference(a.reference)
    if a.half:
        ref = {i: v for i, v in ref.items() if half_of(i) == a.half}
    reach_path = a.reach or a.corpora[0]
    dead = unreached(read_labels(reach_path))
    labels = [read_labels(c) for c in a.corpora]
    rows = []
    for c, lab, iv in zip(a.corpora, labels, intervals(labels, ref)):
        b = {**breakdown(lab, ref, dead), **iv}
        # the same corpus, or one drawn with the same seed (the same continuations where the prefixes agree)
        b["same_draws"] = Path(c).resolve() == Path(reach_path).resolve() or (
            seed_of(c) is not None and seed_of(c) == seed_of(reach_path))
        rows.append((Path(c).name, b))
    if a.json:
        for name, b in rows:
            print(json.dumps({"corpus": name, **b}))
    else:
        k = None
        try:
            k = json.load(open(Path(reach_path) / "manifest.json")).get("k")
        except (OSError, ValueError):
            pass
        print(table(rows, k))


if __name__ == "__main__":
    main()
