"""Collect the GPU end-to-end run into one JSON (device side): stage timings, label manifests, the reuse vs
no-reuse comparison on the same solutions, the PRM card's metrics, the scoring rate, best-of-N.

    python bench/gpu_e2e/summarize.py /tmp/e2e results.json
"""

from __future__ import annotations

import json
import os
import sys


def _rows(url: str, version=None) -> dict:
    from pipeline.corpus import read_corpus

    t = read_corpus(url, version, columns=["id", "first_error", "rollouts", "rollout_tokens", "mc_reused",
                                           "mc_total", "solution_correct", "steps"])
    return {r["id"]: r for r in t.to_pylist()}


def _manifest(url: str, version=None) -> dict:
    from pipeline.corpus import open_manifest

    _, m = open_manifest(url, version)
    return {k: m.get(k) for k in ("version", "counts", "totals", "timings", "run", "stats") if k in m}


def reuse_compare(w: str) -> dict:
    a, b = _rows(f"{w}/corpus", 1), _rows(f"{w}/corpus_noreuse")
    ids = sorted(set(a) & set(b))

    def tot(rows, key):
        return sum(rows[i][key] for i in ids)

    fe_same = sum(a[i]["first_error"] == b[i]["first_error"] for i in ids)
    both_err = [i for i in ids if a[i]["first_error"] >= 0 or b[i]["first_error"] >= 0]
    return {
        "solutions": len(ids),
        "reuse": {"rollouts": tot(a, "rollouts"), "rollout_tokens": tot(a, "rollout_tokens"),
                  "draws_credited_by_reuse": sum(sum(x or 0 for x in a[i]["mc_reused"]) for i in ids),
                  "draws_total": sum(sum(x or 0 for x in a[i]["mc_total"]) for i in ids),
                  "with_error": sum(a[i]["first_error"] >= 0 for i in ids)},
        "no_reuse": {"rollouts": tot(b, "rollouts"), "rollout_tokens": tot(b, "rollout_tokens"),
                     "draws_credited_by_reuse": sum(sum(x or 0 for x in b[i]["mc_reused"]) for i in ids),
                     "draws_total": sum(sum(x or 0 for x in b[i]["mc_total"]) for i in ids),
                     "with_error": sum(b[i]["first_error"] >= 0 for i in ids)},
        "first_error_agree": fe_same,
        "first_error_agree_frac": fe_same / len(ids) if ids else None,
        "has_error_agree": sum((a[i]["first_error"] >= 0) == (b[i]["first_error"] >= 0) for i in ids),
        "either_has_error": len(both_err),
        "first_error_agree_among_either_error": sum(a[i]["first_error"] == b[i]["first_error"] for i in both_err),
        "manifest_reuse_v1": _manifest(f"{w}/corpus", 1),
        "manifest_no_reuse": _manifest(f"{w}/corpus_noreuse"),
    }


def main(w: str, out: str) -> int:
    res: dict = {}
    tp = os.path.join(w, "times.jsonl")
    if os.path.exists(tp):
        with open(tp) as f:
            res["stages"] = [json.loads(x) for x in f if x.strip()]
    for name, fn in (("reuse_compare", lambda: reuse_compare(w)),
                     ("corpus_manifest", lambda: _manifest(f"{w}/corpus"))):
        try:
            res[name] = fn()
        except Exception as e:  # a stage that did not run: say so, keep the rest
            res[name] = {"error": f"{type(e).__name__}: {e}"}
    try:
        rows = _rows(f"{w}/corpus")
        res["corpus"] = {"solutions": len(rows), "correct": sum(bool(r["solution_correct"]) for r in rows.values()),
                         "with_error": sum(r["first_error"] >= 0 for r in rows.values()),
                         "steps": sum(len(r["steps"]) for r in rows.values()),
                         "rollout_tokens": sum(r["rollout_tokens"] for r in rows.values())}
    except Exception as e:
        res["corpus"] = {"error": f"{type(e).__name__}: {e}"}
    card = os.path.join(w, "prm", "mcprm_card.json")
    if os.path.exists(card):
        with open(card) as f:
            res["prm_card"] = json.load(f)
    bp = os.path.join(w, "bestofn.json")
    if os.path.exists(bp):
        with open(bp) as f:
            try:
                res["bestofn"] = json.load(f)
            except ValueError as e:
                res["bestofn"] = {"error": str(e)}
    hp = os.path.join(w, "heldout8.jsonl")
    if os.path.exists(hp):
        with open(hp) as f:
            res["heldout_solutions"] = sum(1 for x in f if x.strip())
    with open(out, "w") as f:
        json.dump(res, f, indent=1, default=str)
    print(json.dumps({k: (v if k != "prm_card" else "...") for k, v in res.items()}, default=str)[:6000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
