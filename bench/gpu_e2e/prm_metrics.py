"""A scored corpus (``mcprm score``) against ProcessBench-style reference labels: the numbers of the data run's
table beyond ``mcprm eval``'s F1 at the PRM's own threshold.

    python bench/gpu_e2e/prm_metrics.py SCORED [reference.jsonl] [--dump scores.jsonl.gz]

* ``step_auroc``: how well ``prm_score`` ranks right steps above wrong ones, over the steps the reference judges
  (up to and including its first error, every step of a right solution): the ProcessBench/PRM800K convention.
* ``f1_own`` / ``f1_05``: ProcessBench's first-error F1 (harmonic mean of acc_error and acc_correct) with the first
  error read as the first step scoring below the PRM's own threshold (the one the scored corpus records, chosen
  on the PRM's validation problems) / below 0.5. ``f1_own`` is what ``mcprm eval`` reports for the same corpus.
* ``f1_split_half``: the threshold chosen on one half of the solutions (by a hash of the id) to maximise F1 there,
  each solution then read with the threshold its own half did not choose; F1 over all of them. No solution's
  threshold is chosen on itself, so the number is a held-out one.

PRM-only when the corpus was scored without ``--use-answer-key`` (the data run's): no gold answer is read here.
``--dump`` writes every solution's step scores (``{"id", "prm_score"}`` a line, 4 decimals, gzip): a PRM never
leaves the GPU machine, its scores can, so its numbers can be read again later without it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys


def first_error(scores, threshold: float) -> int:
    """The first step whose score is below ``threshold`` (an unscored step is skipped), or -1."""
    return next((i for i, p in enumerate(scores) if p is not None and p < threshold), -1)


def f1_at(rows, thresholds) -> dict:
    """ProcessBench F1 of ``rows`` [(scores, label)], row i read at ``thresholds[i]``."""
    err = [(fe, lab) for (s, lab), t in zip(rows, thresholds) for fe in [first_error(s, t)] if lab >= 0]
    ok = [fe for (s, lab), t in zip(rows, thresholds) for fe in [first_error(s, t)] if lab < 0]
    acc_error = sum(fe == lab for fe, lab in err) / len(err) if err else None
    acc_correct = sum(fe == -1 for fe in ok) / len(ok) if ok else None
    f1 = None
    if acc_error is not None and acc_correct is not None:
        f1 = 0.0 if acc_error + acc_correct == 0 else 2 * acc_error * acc_correct / (acc_error + acc_correct)
    return {"f1": f1, "acc_error": acc_error, "acc_correct": acc_correct}


def best_threshold(rows) -> float:
    """The threshold that maximises F1 on ``rows``: every distinct score (a step scoring below it is an error)
    and 1.0 above them all; the lowest of equals, so the choice is a fixed function of the rows."""
    cands = sorted({p for s, _ in rows for p in s if p is not None} | {1.0 + 1e-9})
    best, best_f1 = 0.5, -1.0
    for t in cands:
        f = f1_at(rows, [t] * len(rows))["f1"]
        if f is not None and f > best_f1:
            best, best_f1 = t, f
    return best


def half(row_id: str) -> int:
    return hashlib.blake2b(str(row_id).encode(), digest_size=8).digest()[0] & 1


def metrics(rows_by_id: dict, labels: dict, own: float) -> dict:
    from pipeline.stats.calibration import auroc

    ids = [i for i in rows_by_id if i in labels]
    rows = [(rows_by_id[i], labels[i]) for i in ids]
    steps, right = [], []
    for s, lab in rows:
        judged = s if lab < 0 else s[: lab + 1]
        for j, p in enumerate(judged):
            if p is not None:
                steps.append(p)
                right.append(lab < 0 or j < lab)
    halves = {h: [r for i, r in zip(ids, rows) if half(i) == h] for h in (0, 1)}
    chosen = {h: best_threshold(halves[1 - h]) if halves[1 - h] else None for h in (0, 1)}
    cross = [(r, chosen[half(i)]) for i, r in zip(ids, rows) if chosen[half(i)] is not None]
    split = f1_at([r for r, _ in cross], [t for _, t in cross])
    return {"solutions": len(rows), "unmatched": len(rows_by_id) - len(ids),
            "with_error": sum(lab >= 0 for _, lab in rows), "steps_judged": len(steps),
            "step_auroc": auroc(steps, right), "threshold_own": own,
            "f1_own": f1_at(rows, [own] * len(rows))["f1"], "f1_05": f1_at(rows, [0.5] * len(rows))["f1"],
            "f1_split_half": split["f1"], "split_half_thresholds": [chosen[0], chosen[1]],
            "own": f1_at(rows, [own] * len(rows)), "at_05": f1_at(rows, [0.5] * len(rows)), "split_half": split}


def read_scored(path: str) -> tuple[dict, float]:
    from pipeline.corpus import iter_corpus, open_manifest

    _, m = open_manifest(path, None)
    own = float((m.get("config") or {}).get("threshold", 0.5))
    out = {}
    for b in iter_corpus(path, columns=["id", "prm_score"]):
        for r in b.to_pylist():
            out[str(r["id"])] = list(r["prm_score"] or [])
    return out, own


def read_labels(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return {str(d["id"]): int(d["label"]) for d in (json.loads(x) for x in f if x.strip())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scored")
    ap.add_argument("reference", nargs="?", default=None)
    ap.add_argument("--dump", default=None, help="write the step scores here (JSONL, gzip)")
    a = ap.parse_args(argv)
    rows, own = read_scored(a.scored)
    if a.dump:
        import gzip

        with gzip.GzipFile(a.dump, "wb", mtime=0) as f:
            for i, s in rows.items():
                f.write((json.dumps({"id": i, "prm_score": [None if p is None else round(p, 4) for p in s]})
                         + "\n").encode())
    if a.reference:
        print(json.dumps(metrics(rows, read_labels(a.reference), own), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
