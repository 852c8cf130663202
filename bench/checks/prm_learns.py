"""Does a PRM trained by ``train()`` on the bundled task rank held-out steps better than their position does, at
the size the recipe study trained on (200 solutions, both kinds)? The truth is the exact checker's; the held-out
set is the sample's last 100 solutions (problems disjoint from the training ones). Prints a table (kind, training
solutions, step AUC of the PRM and of "later steps are worse", training seconds); exit status 1 when a PRM does
not beat position. The test suite runs :func:`measure` on 80 training solutions
(tests/pipeline/training/test_learns.py); this check is the full size.

    python bench/checks/prm_learns.py                 # both kinds, 200 training solutions
    python bench/checks/prm_learns.py --kinds head --train 120
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELD_OUT_FROM = 200  # the sample's rows from here on are never trained on


def _auc(scores, good) -> float:
    pos = [s for s, g in zip(scores, good, strict=True) if g]
    neg = [s for s, g in zip(scores, good, strict=True) if not g]
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


def measure(kind: str, n_train: int, work: Path) -> dict:
    """Train ``kind`` on the sample's first ``n_train`` solutions (exact labels) in ``work``; the step AUC of its
    scores and of position on the held-out solutions (the steps up to the first error are judged)."""
    import torch

    from pipeline.bundled import DATA_DIR
    from pipeline.bundled.synthetic import check_steps, exact_corpus
    from pipeline.training.options import TrainConfig
    from pipeline.training.score import load_prm, predict_probs
    from pipeline.training.train import train

    if not 0 < n_train <= HELD_OUT_FROM:
        raise ValueError(f"n_train must be in 1..{HELD_OUT_FROM} (the rows after it are held out), got {n_train}")
    rows = [json.loads(x) for x in (DATA_DIR / "sample.jsonl").read_text().splitlines() if x.strip()]
    train_rows, held = rows[:n_train], rows[HELD_OUT_FROM:]
    assert not {r["problem"] for r in train_rows} & {r["problem"] for r in held}
    exact_corpus(train_rows, work / "corpus")
    torch.set_num_threads(1)
    t0 = time.monotonic()
    train(TrainConfig(corpus=str(work / "corpus"), output=str(work / "prm"), progress=False, seed=0, kind=kind))
    seconds = time.monotonic() - t0
    prm = load_prm(str(work / "prm"), device="cpu")
    probs = predict_probs(prm.model, prm.tokenizer, prm.fmt, prm.sep_id, [(r["problem"], r["steps"]) for r in held])
    scores, position, good = [], [], []
    for r, p in zip(held, probs, strict=True):
        fe = check_steps(r["problem"], r["steps"]).first_error
        last = len(r["steps"]) - 1 if fe == -1 else fe
        for i in range(last + 1):
            scores.append(p[i])
            position.append(-i)
            good.append(i != fe)
    assert 0 < sum(good) < len(good)
    return {"kind": kind, "train": n_train, "prm_auc": _auc(scores, good), "position_auc": _auc(position, good),
            "train_s": seconds}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", nargs="+", default=["head", "implicit"])
    ap.add_argument("--train", type=int, default=HELD_OUT_FROM, help="training solutions (default 200)")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    bad = 0
    print("| kind | training solutions | PRM step AUC | position AUC | train s |\n|---|---:|---:|---:|---:|")
    for kind in a.kinds:
        with tempfile.TemporaryDirectory(prefix="mcprm-learns-") as d:
            m = measure(kind, a.train, Path(d))
        bad += m["prm_auc"] <= m["position_auc"]
        print(f"| {kind} | {m['train']} | {m['prm_auc']:.3f} | {m['position_auc']:.3f} | {m['train_s']:.0f} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
