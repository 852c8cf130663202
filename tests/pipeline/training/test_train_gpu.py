"""mcprm train / score on a GPU: bf16 autocast, the card says so, and scoring in bf16 agrees with float32 on CPU
(run on the lent GPU machine: ``pytest -m gpu tests/pipeline/training/test_train_gpu.py``; two GPUs:
``torchrun --nproc-per-node 2 -m cli.main train ...`` as in docs/training.md)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

pytestmark = pytest.mark.gpu


def test_bf16_training_and_scoring(tmp_path):
    from pipeline.bundled import SAMPLE_PATH
    from pipeline.labeling.types import LabeledSolution, Solution, StepStats
    from pipeline.storage.schema import to_table
    from pipeline.storage.store import CorpusStore
    from pipeline.training.score import load_prm, predict_probs
    from pipeline.training.train import TrainConfig, train

    rows = [json.loads(x) for x in SAMPLE_PATH.read_text().splitlines()[:64]]
    labeled = []
    for r in rows:  # the checker's reference first error as the labels (no rollouts needed for this test)
        n, fe = len(r["steps"]), r["reference_first_error"]
        labels = [True] * n if fe == -1 else [True] * fe + [False] + [None] * (n - fe - 1)
        sol = Solution(r["id"], r["problem"], r["answer"], tuple(r["steps"]))
        labeled.append(LabeledSolution(sol, labels, [StepStats() for _ in range(n)], fe, fe == -1,
                                       strategy="per-step"))
    store = CorpusStore(str(tmp_path / "c"))
    store.write_table("data/v00001/part-00000.parquet", to_table(labeled, 0))
    store.commit({"format": "mcprm-corpus", "version": 1, "strategy": "per-step", "k": 0, "config": {},
                  "shards": [{"path": "data/v00001/part-00000.parquet", "rows": len(labeled)}]})
    res = train(TrainConfig(str(tmp_path / "c"), str(tmp_path / "prm"), epochs=1, progress=False))
    assert res.card["hyperparameters"]["bf16"] is torch.cuda.is_bf16_supported()
    items = [(r["problem"], r["steps"]) for r in rows[:16]]
    gpu = load_prm(str(tmp_path / "prm"), device="cuda")
    cpu = load_prm(str(tmp_path / "prm"), device="cpu")
    pg = predict_probs(gpu.model, gpu.tokenizer, gpu.fmt, gpu.sep_id, items)
    pc = predict_probs(cpu.model, cpu.tokenizer, cpu.fmt, cpu.sep_id, items)
    for a, b in zip(pg, pc, strict=True):
        assert a == pytest.approx(b, abs=0.03)  # bf16 vs float32
