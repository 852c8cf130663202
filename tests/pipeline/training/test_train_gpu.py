"""mcprm train / score on a GPU: bf16 autocast, the card says so, and scoring in bf16 agrees with float32 on CPU
(run on the lent GPU machine: ``pytest -m gpu tests/pipeline/training/test_train_gpu.py``; two GPUs:
``torchrun --nproc-per-node 2 -m cli.main train ...`` as in docs/training.md)."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

pytestmark = pytest.mark.gpu


def test_bf16_training_and_scoring(tmp_path):
    from pipeline.bundled import SAMPLE_PATH
    from pipeline.solution import LabeledSolution, Solution, StepStats
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
    # the head kind: the implicit one (the bundled model's auto kind) trains in float32 by design
    res = train(TrainConfig(str(tmp_path / "c"), str(tmp_path / "prm"), kind="head", epochs=1, progress=False))
    assert res.card["hyperparameters"]["bf16"] is torch.cuda.is_bf16_supported()
    items = [(r["problem"], r["steps"]) for r in rows[:16]]
    gpu = load_prm(str(tmp_path / "prm"), device="cuda")
    cpu = load_prm(str(tmp_path / "prm"), device="cpu")
    pg = predict_probs(gpu.model, gpu.tokenizer, gpu.fmt, gpu.sep_id, items)
    pc = predict_probs(cpu.model, cpu.tokenizer, cpu.fmt, cpu.sep_id, items)
    for a, b in zip(pg, pc, strict=True):
        assert a == pytest.approx(b, abs=0.03)  # bf16 vs float32


def _negative_logit_qwen2(path, tok_dir):
    """A tiny random Qwen2 whose first layer has a head with every attention logit near -120 (as some heads of
    Qwen2.5 have): every query row's logsumexp is then below ln(FLT_MAX) ~ -88.7, the condition under which
    cuDNN's attention backward returns NaN query gradients at lengths 64 mod 128 with a mask."""
    import math

    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tok = AutoTokenizer.from_pretrained(tok_dir)
    cfg = Qwen2Config(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=2, vocab_size=len(tok) + 8, max_position_embeddings=1024,
                      dtype="bfloat16", pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    attn = model.model.layers[0].self_attn
    d = cfg.hidden_size // cfg.num_attention_heads
    lowest = d // 2 - 1  # the rotary pair that turns least with position: the dot product stays put
    with torch.no_grad():
        attn.q_proj.bias[lowest] = 1.0
        attn.k_proj.bias[lowest] = -120.0 * math.sqrt(d)
    model.to(torch.bfloat16).save_pretrained(path)
    tok.save_pretrained(path)


def _padded_corpus(path) -> str:
    """64 rows of the bundled char tokenizer whose padded lengths run from about 150 to 380 tokens."""
    from pipeline.solution import LabeledSolution, Solution, StepStats
    from pipeline.storage.schema import to_table
    from pipeline.storage.store import CorpusStore

    labeled = []
    for i in range(64):  # the bundled char tokenizer: a row's length is about its characters
        steps = [f"step {j} of row {i}: " + "x" * (10 + (i * 13 + j * 7) % 60) for j in range(4)]
        fe = i % 5 - 1 if i % 5 else -1
        labels = [True] * 4 if fe == -1 else [True] * fe + [False] * (4 - fe)
        sol = Solution(f"r{i}", f"Problem {i}: " + "y" * (i % 7), "1", tuple(steps))
        labeled.append(LabeledSolution(sol, labels, [StepStats() for _ in range(4)], fe, fe == -1,
                                       strategy="per-step"))
    store = CorpusStore(str(path))
    store.write_table("data/v00001/part-00000.parquet", to_table(labeled, 0))
    store.commit({"format": "mcprm-corpus", "version": 1, "strategy": "per-step", "k": 0, "config": {},
                  "shards": [{"path": "data/v00001/part-00000.parquet", "rows": len(labeled)}]})
    return str(path)


def test_cudnn_attention_backward_nan_is_kept_out(tmp_path):
    """The bug, reproduced on this GPU with PyTorch's own repro at length 192 (64 mod 128), and the training
    guard's kernels exact on the same inputs."""
    import math

    import torch.nn.functional as F

    from pipeline.training.trainer import attention_guard

    def grad_q(guarded: bool):
        torch.manual_seed(0)
        n, d = 192, 64
        q = torch.randn(1, 1, n, d, device="cuda", dtype=torch.bfloat16) * 0.1
        k = torch.randn(1, 1, n, d, device="cuda", dtype=torch.bfloat16) * 0.1
        v = torch.randn(1, 1, n, d, device="cuda", dtype=torch.bfloat16)
        q[..., 0], k[..., 0] = 1.0, -120 * math.sqrt(d)
        q.requires_grad_()
        mask = torch.ones(n, n, dtype=torch.bool, device="cuda").tril()[None, None]
        import contextlib

        with attention_guard() if guarded else contextlib.nullcontext():
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            out.backward(torch.ones_like(out))
        return q.grad

    assert torch.isfinite(grad_q(True)).all()
    bad = int((~torch.isfinite(grad_q(False))).sum())
    print(f"cuDNN SDPA default backend: {bad} non-finite query gradients")  # 0 once PyTorch/cuDNN fix it


def test_bf16_training_stays_finite_across_lengths_64_mod_128(tmp_path):
    """`mcprm train` in bf16 on a model with an all-negative-logit head, over padded batches of 150-380 tokens
    (192 and 320 are 64 mod 128): every step's gradient is finite (none skipped), the loss is finite every
    epoch. The head now trains without a padding mask (the causal kernel), where the bug cannot arise; before
    that change, this run without the guard skipped steps or went NaN on an H100 (bench/gpu_e2e/train_gpu.sh
    tests)."""
    from pipeline.bundled import MODEL_DIR
    from pipeline.training.train import TrainConfig, train

    base = tmp_path / "base"
    _negative_logit_qwen2(base, str(MODEL_DIR))
    _padded_corpus(tmp_path / "c")
    res = train(TrainConfig(str(tmp_path / "c"), str(tmp_path / "prm"), base_model=str(base), kind="head",
                            bf16="on", epochs=3, batch_size=8, max_length=512, val_fraction=0.2, progress=False))
    tr = res.card["training"]
    lengths = res.card["training"]["speed"]
    assert res.card["hyperparameters"]["bf16"] is True
    assert tr["skipped_steps"] == 0 and tr.get("non_finite") is None, tr
    assert all(math.isfinite(h.get("loss", 0.0)) and math.isfinite(h.get("grad_norm", 0.0)) for h in tr["history"])
    assert lengths["padded_tokens_per_epoch"] > 0


def test_compiled_layers_train_as_the_eager_ones(tmp_path):
    """`--compile` (the GPU default) fuses each decoder layer's kernels: the same bf16 training, compiled and
    eager, gives the same losses to bf16's precision, every gradient finite, and PRMs that score alike."""
    from pipeline.training.score import load_prm, predict_probs
    from pipeline.training.train import TrainConfig, train

    base = tmp_path / "base"
    from pipeline.bundled import MODEL_DIR

    _negative_logit_qwen2(base, str(MODEL_DIR))
    corpus = _padded_corpus(tmp_path / "c")
    cards = {}
    for c in ("off", "on"):
        cards[c] = train(TrainConfig(corpus, str(tmp_path / f"prm-{c}"), base_model=str(base), kind="head",
                                     bf16="on", compile=c, epochs=2, batch_size=8, max_length=512,
                                     val_fraction=0.0, progress=False, seed=0)).card
    assert cards["on"]["training"]["speed"]["compiled_layers"] == 2
    assert cards["off"]["training"]["speed"]["compiled_layers"] == 0
    for c in cards.values():
        assert c["training"]["skipped_steps"] == 0
    lo = [h["loss"] for h in cards["off"]["training"]["history"] if "loss" in h]
    lc = [h["loss"] for h in cards["on"]["training"]["history"] if "loss" in h]
    assert len(lo) == len(lc) == 2 and all(math.isfinite(x) for x in lo + lc)
    for a, b in zip(lo, lc, strict=True):
        assert b == pytest.approx(a, rel=0.05, abs=0.02)
    items = [(f"Problem {i}", [f"step {j}" for j in range(3)]) for i in range(8)]
    got = {}
    for c in cards:
        p = load_prm(str(tmp_path / f"prm-{c}"), device="cuda")
        got[c] = predict_probs(p.model, p.tokenizer, p.fmt, p.sep_id, items)
    for a, b in zip(got["off"], got["on"], strict=True):
        assert b == pytest.approx(a, abs=0.05)
