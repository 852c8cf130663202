"""A PRM trained by ``train()`` on the bundled task learns something a step's position alone does not tell:
on held-out problems its step scores rank good steps above wrong ones better than "later steps are worse" does.

Real parts: the bundled model and sample, the exact checker's labels, a real Parquet corpus, the HF Trainer on
CPU. Train on 200 solutions, measure on the 100 others (disjoint problems). The truth is the exact checker's.
Both kinds (a head at the separator; an implicit PRM read through the LM's head). A PRM whose labels were
misaligned with its separators, or whose head read the wrong positions, ranks no better than position (BENCHMARKS.md, issue 28: the PRM recipe study, where such a PRM reaches step AUC ~0.8 against
~0.7 for position at 300 solutions)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from pipeline.bundled import DATA_DIR  # noqa: E402
from pipeline.bundled.synthetic import check_steps, exact_corpus  # noqa: E402

pytestmark = pytest.mark.slow  # two PRM trainings on 200 solutions (started first: tests/conftest.py)


def _auc(scores, good) -> float:
    pos = [s for s, g in zip(scores, good, strict=True) if g]
    neg = [s for s, g in zip(scores, good, strict=True) if not g]
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


@pytest.mark.parametrize("kind", ["head", "implicit"])
def test_trained_prm_ranks_held_out_steps_better_than_their_position(tmp_path, kind):
    from pipeline.training.options import TrainConfig
    from pipeline.training.score import load_prm, predict_probs
    from pipeline.training.train import train

    rows = [json.loads(x) for x in (DATA_DIR / "sample.jsonl").read_text().splitlines() if x.strip()]
    train_rows, held = rows[:200], rows[200:]
    assert not {r["problem"] for r in train_rows} & {r["problem"] for r in held}
    exact_corpus(train_rows, tmp_path / "corpus")
    torch.set_num_threads(1)
    train(TrainConfig(corpus=str(tmp_path / "corpus"), output=str(tmp_path / "prm"), progress=False, seed=0,
                      kind=kind))
    prm = load_prm(str(tmp_path / "prm"), device="cpu")
    probs = predict_probs(prm.model, prm.tokenizer, prm.fmt, prm.sep_id, [(r["problem"], r["steps"]) for r in held])
    scores, position, good = [], [], []
    for r, p in zip(held, probs, strict=True):
        fe = check_steps(r["problem"], r["steps"]).first_error
        last = len(r["steps"]) - 1 if fe == -1 else fe  # the steps up to the first error are judged
        for i in range(last + 1):
            scores.append(p[i])
            position.append(-i)
            good.append(i != fe)
    assert 0 < sum(good) < len(good)
    prm_auc, pos_auc = _auc(scores, good), _auc(position, good)
    assert prm_auc > pos_auc, (prm_auc, pos_auc)
