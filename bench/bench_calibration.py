"""Is ``first_error_confidence`` true? Calibration against the exact checker, plus F1 and soft values.

Reads a labeled corpus of a synthetic sample (``data/make_sample.py --seed S``, which records each solution's
``reference_first_error`` from the bundled task's exact checker) and prints, among the rows decided by
rollouts (``rollouts > 0``), the stated confidence against how often the stored ``first_error`` is the
checker's, in five equal-width bins, the expected calibration error (ECE), and the first-error F1
(ProcessBench: harmonic mean of the accuracy on erroneous and on correct solutions, all rows). With
``--per-step DIR`` (a per-step corpus of the same sample) it also compares the mean ``mc_value`` on the steps
both sampled.

    python data/make_sample.py --seed 5102 --n 400 --out-dir /tmp/fresh
    mcprm label --input /tmp/fresh/sample.jsonl --output /tmp/fresh-out
    python bench/bench_calibration.py /tmp/fresh-out --reference /tmp/fresh/sample.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def calibration(rows: list[dict], truth: dict[str, int], bins: int = 5) -> dict:
    """Per-bin (rows, mean stated, share right) and the ECE over rows with rollouts and a confidence."""
    table = [[0, 0.0, 0] for _ in range(bins)]
    for r in rows:
        c = r["first_error_confidence"]
        if r["rollouts"] <= 0 or c is None:
            continue
        b = min(bins - 1, int(c * bins))
        table[b][0] += 1
        table[b][1] += c
        table[b][2] += r["first_error"] == truth[r["id"]]
    n = sum(t[0] for t in table)
    ece = sum(abs(t[1] - t[2]) for t in table) / n if n else float("nan")
    return {"rows": n, "ece": ece,
            "bins": [{"lo": i / bins, "hi": (i + 1) / bins, "rows": t[0], "stated": t[1] / t[0] if t[0] else None,
                      "right": t[2] / t[0] if t[0] else None} for i, t in enumerate(table)]}


def auroc(rows: list[dict], truth: dict[str, int]) -> dict:
    """How well ``first_error_confidence`` ranks rows whose first error is the checker's above those whose is
    not (rows with rollouts and a confidence; ``pipeline.stats.calibration.auroc``)."""
    from pipeline.stats.calibration import auroc as auroc_of

    scored = [(r["first_error_confidence"], r["first_error"] == truth[r["id"]])
              for r in rows if r["rollouts"] > 0 and r["first_error_confidence"] is not None]
    return {"rows": len(scored), "right": sum(ok for _c, ok in scored),
            "auroc": auroc_of([c for c, _ in scored], [ok for _, ok in scored])}


def noise_floor(rows: list[dict], bins: int = 5, sims: int = 4000, observed: float | None = None,
                seed: int = 0) -> dict:
    """The ECE a *perfectly calibrated* confidence would show on these rows: each row right with exactly its
    stated probability, redrawn ``sims`` times. Its mean and 95th percentile say how far under the bar's 0.05 an
    ECE can be read at this many rows; ``p`` (with ``observed``) is the share of draws at or above the observed
    ECE, the test of "calibrated" against the truth."""
    import random

    rng = random.Random(seed)
    cs = [r["first_error_confidence"] for r in rows
          if r["rollouts"] > 0 and r["first_error_confidence"] is not None]
    if not cs:
        return {"rows": 0}
    eces = []
    for _ in range(sims):
        table = [[0, 0.0, 0] for _ in range(bins)]
        for c in cs:
            t = table[min(bins - 1, int(c * bins))]
            t[0] += 1
            t[1] += c
            t[2] += rng.random() < c
        eces.append(sum(abs(t[1] - t[2]) for t in table) / len(cs))
    eces.sort()
    out = {"rows": len(cs), "mean": sum(eces) / sims, "p95": eces[int(0.95 * sims)]}
    if observed is not None:
        out["p"] = sum(e >= observed for e in eces) / sims
    return out


def f1(rows: list[dict], truth: dict[str, int]) -> dict:
    err = [r for r in rows if truth[r["id"]] != -1]
    ok = [r for r in rows if truth[r["id"]] == -1]
    ae = sum(r["first_error"] == truth[r["id"]] for r in err) / len(err) if err else 0.0
    ac = sum(r["first_error"] == -1 for r in ok) / len(ok) if ok else 0.0
    return {"f1": 2 * ae * ac / (ae + ac) if ae + ac else 0.0, "acc_error": ae, "acc_correct": ac,
            "tokens": sum(r["rollout_tokens"] for r in rows)}


def soft_ratio(rows: list[dict], base: list[dict]) -> dict:
    """Mean mc_value of this corpus / of ``base`` on the (row, step) pairs both estimated (last step excluded)."""
    by_id = {r["id"]: r for r in base}
    a = b = 0.0
    n = 0
    for r in rows:
        o = by_id.get(r["id"])
        if o is None:
            continue
        for i in range(len(r["steps"]) - 1):
            x, y = r["mc_value"][i], o["mc_value"][i]
            if x is not None and y is not None:
                a += x
                b += y
                n += 1
    return {"steps": n, "mean": a / n if n else None, "base_mean": b / n if n else None,
            "ratio": a / b if b else None}


def _rows(url: str, refit: bool = False) -> list[dict]:
    """The corpus's rows with the confidence of the current first-error model: a corpus committed by an earlier
    model (or none, or any with ``refit``) is refitted here exactly as a commit would (pipeline.storage.confidence)."""
    from pipeline.corpus import open_manifest, read_corpus
    from pipeline.storage import confidence

    table = read_corpus(url)
    _store, m = open_manifest(url)
    if refit or confidence.model_of(m) is None:
        model = confidence.fit_model([table.select(confidence.FIT_COLUMNS)])
        table = confidence.fill(table, confidence.model_of({"first_error_model": model}))
    return table.to_pylist()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus")
    ap.add_argument("--reference", required=True, help="the sample JSONL with reference_first_error")
    ap.add_argument("--per-step", help="a per-step corpus of the same sample (soft-value comparison)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--refit", action="store_true", help="refit the first-error model with this code's (as a "
                                                          "commit would) whatever the manifest holds")
    a = ap.parse_args(argv)
    truth = {}
    with open(a.reference) as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                truth[d["id"]] = d["reference_first_error"]
    rows = _rows(a.corpus, a.refit)
    out = {"calibration": calibration(rows, truth), "quality": f1(rows, truth), "ranking": auroc(rows, truth)}
    out["noise_floor"] = noise_floor(rows, observed=out["calibration"]["ece"])
    if a.per_step:
        base = _rows(a.per_step, a.refit)
        out["soft"] = soft_ratio(rows, base)
        out["per_step_quality"] = f1(base, truth)
    if a.json:
        print(json.dumps(out, indent=1))
        return
    c = out["calibration"]
    nf = out["noise_floor"]
    print(f"{c['rows']} rows decided by rollouts; ECE {c['ece']:.3f} (a perfectly calibrated confidence on these rows: "
          f"ECE {nf['mean']:.3f} on average, 95th percentile {nf['p95']:.3f}; p = {nf['p']:.3f})")
    print("| stated | rows | mean stated | right |\n|---|---:|---:|---:|")
    for b in c["bins"]:
        st = "-" if b["stated"] is None else f"{b['stated']:.3f}"
        rt = "-" if b["right"] is None else f"{b['right']:.3f}"
        print(f"| {b['lo']:.1f}-{b['hi']:.1f} | {b['rows']} | {st} | {rt} |")
    rk = out["ranking"]
    au = "n/a (all rows right or all wrong)" if rk["auroc"] is None else f"{rk['auroc']:.3f}"
    print(f"ranking: AUROC {au} ({rk['right']} of {rk['rows']} rows' first errors are the checker's)")
    q = out["quality"]
    print(f"first-error F1 {q['f1']:.3f} (acc_error {q['acc_error']:.3f}, acc_correct {q['acc_correct']:.3f}), "
          f"{q['tokens']:,} tokens")
    if a.per_step:
        s, pq = out["soft"], out["per_step_quality"]
        print(f"per-step: F1 {pq['f1']:.3f}, {pq['tokens']:,} tokens; mean mc_value on {s['steps']} shared steps "
              f"{s['mean']:.3f} vs per-step {s['base_mean']:.3f}: ratio {s['ratio']:.2f}")


if __name__ == "__main__":
    main()
