"""A real TRL PRMTrainer (trl 1.13.0, ``trl.experimental.prm``) trains a few steps on an mcprm export on CPU.

The backbone is the bundled model's architecture (Llama) as ``LlamaForTokenClassification``: the bundled
checkpoint when ``data/model`` exists, else a tiny random one with the same tokenizer layout.
"""

from __future__ import annotations

import math
import os

import pytest

from pipeline.bundled import MODEL_DIR
from pipeline.export import export_corpus
from tests.export_files import load_export
from tests.pipeline.prm_fixtures import char_tokenizer, make_corpus

TRL_PIN = "1.13.0"  # PRMTrainer lives in trl.experimental.prm there; later releases removed it


def _trl():
    try:
        import trl
        from trl.experimental.prm import PRMConfig, PRMTrainer
    except ImportError as e:
        if os.environ.get("CI"):
            raise AssertionError(f"trl=={TRL_PIN} is required for this test in CI ({e})") from e
        pytest.skip(f"needs trl=={TRL_PIN} (pip install trl=={TRL_PIN}): {e}")
    if trl.__version__ != TRL_PIN and not os.environ.get("CI"):
        pytest.skip(f"pinned to trl=={TRL_PIN}, found {trl.__version__}")
    assert trl.__version__ == TRL_PIN, f"CI must install trl=={TRL_PIN}, found {trl.__version__}"
    return PRMConfig, PRMTrainer


def _model_and_tokenizer():
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForTokenClassification

    torch.manual_seed(0)
    if (MODEL_DIR / "config.json").exists():
        tok = AutoTokenizer.from_pretrained(MODEL_DIR)
        model = LlamaForTokenClassification.from_pretrained(MODEL_DIR, num_labels=2)
    else:
        tok = char_tokenizer(extra_special=())
        cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
                          pad_token_id=tok.pad_token_id, num_labels=2)
        model = LlamaForTokenClassification(cfg)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tok.pad_token_id
    return model, tok


def test_prm_trainer_trains_on_export(tmp_path):
    PRMConfig, PRMTrainer = _trl()
    import datasets

    model, tok = _model_and_tokenizer()
    make_corpus(tmp_path / "out")
    res = export_corpus(str(tmp_path / "out"), "trl", str(tmp_path / "trl"), tokenizer=tok)
    assert res.tokenizer_checked and res.rows == 6
    ds = datasets.load_dataset(str(tmp_path / "trl"), split="train")
    rows = load_export(str(tmp_path / "trl"))

    args = PRMConfig(output_dir=str(tmp_path / "ckpt"), max_steps=4, per_device_train_batch_size=3,
                     learning_rate=1e-3, logging_steps=1, report_to=[], save_strategy="no", use_cpu=True,
                     step_separator="\n", max_length=None, seed=0)
    trainer = PRMTrainer(model=model, args=args, train_dataset=ds, processing_class=tok)

    # label tokens sit where the steps end: on the separator after each step, nowhere else
    sep = tok.encode("\n", add_special_tokens=False)
    assert len(sep) == 1
    tokenized = trainer.train_dataset
    assert len(tokenized) == len(rows)
    for row, item in zip(rows, tokenized, strict=True):
        ids, labels = item["input_ids"], item["labels"]
        pos = len(tok.encode(row["prompt"], add_special_tokens=False)) + (tok.bos_token_id is not None)
        expected, prev = [], pos
        for step in row["completions"]:
            pos += len(tok.encode(step, add_special_tokens=False)) + 1
            expected.append(pos - 1)
            assert tok.decode(ids[prev:pos - 1]) == step  # the tokens before the label are the step itself
            prev = pos
        got = [i for i, y in enumerate(labels) if y != -100]
        assert got == expected, row["id"]
        assert [labels[i] for i in got] == [int(y) for y in row["labels"]]
        assert all(ids[i] == sep[0] for i in got)
    assert any("\n" in s for r in rows for s in r["completions"])  # a newline inside a step carries no label

    out = trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert trainer.state.global_step == 4 and len(losses) == 4
    assert all(math.isfinite(x) and x > 0 for x in losses) and math.isfinite(out.training_loss)
