"""The PRM's Trainer (pipeline.training.trainer) on CPU with the real bundled model: the batches, the gradient
under accumulation, a skipped non-finite step, the threshold's rows, the outcome model's targets, truncation and
the PRM folder (dtype, no checkpoints)."""

from __future__ import annotations

import json
import random

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from pipeline.bundled import SAMPLE_PATH  # noqa: E402
from pipeline.training.trainer import TokenBatches  # noqa: E402


def test_token_batches_cover_every_row_once_a_fixed_number_of_times_within_budget():
    rng = random.Random(3)
    lengths = [rng.randint(20, 700) for _ in range(1000)] + [5000]  # one row longer than the budget
    tb = TokenBatches(lengths, max_rows=16, max_tokens=4096, seed=1, pad_multiple=8)
    draws = []
    for epoch in range(4):
        tb.set_epoch(epoch)
        batches = list(tb)
        assert len(batches) == len(tb)  # what the Trainer plans its schedule on
        assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
        for b in batches:
            assert 1 <= len(b) <= 16
            padded = max(-(-lengths[i] // 8) * 8 for i in b) * len(b)
            assert padded <= 4096 * 1.2 or len(b) == 1
        draws.append(batches)
    assert draws[0] != draws[1]  # a new draw every epoch
    again = TokenBatches(lengths, max_rows=16, max_tokens=4096, seed=1, pad_multiple=8)
    again.set_epoch(2)
    assert list(again) == draws[2]  # every process of a multi-GPU run draws the same batches
    # neighbours in length share a batch: far less padding than batches of random rows
    rand = [list(range(i, min(i + 16, len(lengths)))) for i in range(0, len(lengths) - 1, 16)]
    waste = sum(max(lengths[i] for i in b) * len(b) for b in draws[0][:-1]) / sum(lengths)
    waste_random = sum(max(lengths[i] for i in b) * len(b) for b in rand) / sum(lengths[:-1])
    assert waste < 0.8 * waste_random


def test_token_batches_give_every_rank_a_similar_load_at_each_step():
    rng = random.Random(5)
    lengths = [rng.choice([40, 60, 900, 1000]) for _ in range(800)]
    tb = TokenBatches(lengths, max_rows=8, max_tokens=4096, seed=2, ranks=4)
    plain = TokenBatches(lengths, max_rows=8, max_tokens=4096, seed=2, ranks=1)

    def idle(batches):  # what the ranks wait for at each step: slowest minus mean cost of the 4 batches
        cost = [max(lengths[i] for i in b) * len(b) for b in batches]
        groups = [cost[i:i + 4] for i in range(0, len(cost) - 3, 4)]
        return sum(max(g) - sum(g) / 4 for g in groups) / sum(cost)

    balanced, unbalanced = list(tb), list(plain)
    assert sorted(i for b in balanced for i in b) == list(range(len(lengths)))
    assert idle(balanced) < 0.5 * idle(unbalanced)


def _exact_corpus(path, n=24):
    from pipeline.bundled.synthetic import exact_corpus

    rows = [json.loads(x) for x in SAMPLE_PATH.read_text().splitlines()[:n]]
    exact_corpus(rows, path)
    return rows


def _cfg(tmp_path, name, **kw):
    from pipeline.training.options import TrainConfig

    base = dict(corpus=str(tmp_path / "corpus"), output=str(tmp_path / name), kind="head", epochs=1,
                learning_rate=1e-3, val_fraction=0.0, progress=False, seed=0, class_balance=False,
                max_batch_tokens=1 << 20, warmup_ratio=0.0)
    base.update(kw)
    return TrainConfig(**base)


def test_gradient_accumulation_gives_the_same_gradient_as_one_batch(tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from pipeline.bundled import MODEL_DIR
    from pipeline.training.train import train

    _exact_corpus(tmp_path / "corpus", n=8)
    torch.set_num_threads(1)
    # the head's dropout off, so that the two runs compute the same function
    base = tmp_path / "base"
    cfg = AutoConfig.from_pretrained(str(MODEL_DIR))
    cfg.classifier_dropout = 0.0
    AutoModelForCausalLM.from_pretrained(str(MODEL_DIR), config=cfg).save_pretrained(base)
    AutoTokenizer.from_pretrained(str(MODEL_DIR)).save_pretrained(base)
    one = train(_cfg(tmp_path, "g1", batch_size=8, grad_accum=1, base_model=str(base))).card
    two = train(_cfg(tmp_path, "g2", batch_size=4, grad_accum=2, base_model=str(base))).card
    assert one["training"]["steps"] == two["training"]["steps"] == 1
    g1 = one["training"]["history"][0]["grad_norm"]
    g2 = two["training"]["history"][0]["grad_norm"]
    assert g1 > 0 and g2 == pytest.approx(g1, rel=1e-3)  # not G times it
    l1, l2 = one["training"]["history"][0]["loss"], two["training"]["history"][0]["loss"]
    assert l2 == pytest.approx(l1, rel=1e-3)


def test_a_step_with_a_non_finite_gradient_is_skipped_and_counted(tmp_path):
    from transformers import TrainingArguments

    from pipeline.bundled import MODEL_DIR
    from pipeline.training.base import load_base
    from pipeline.training.collate import DEFAULT_SEPARATOR, PrmFormat, make_example
    from pipeline.training.trainer import make_trainer, train_batches

    torch.manual_seed(0)
    model, tok, sep_id, _ = load_base(str(MODEL_DIR), DEFAULT_SEPARATOR, "head")
    fmt = PrmFormat(separator=DEFAULT_SEPARATOR)
    rows = [json.loads(x) for x in SAMPLE_PATH.read_text().splitlines()[:12]]
    examples = []
    for r in rows:
        fe = r["reference_first_error"]
        t = [1.0] * len(r["steps"]) if fe == -1 else [1.0] * fe + [0.0] + [None] * (len(r["steps"]) - fe - 1)
        examples.append(make_example(tok, fmt, sep_id, r["problem"], r["steps"], t))
    args = TrainingArguments(output_dir=str(tmp_path / "ck"), max_steps=3, per_device_train_batch_size=4,
                             learning_rate=1e-3, report_to=[], use_cpu=True, save_strategy="no", logging_steps=1,
                             disable_tqdm=True, remove_unused_columns=False)
    trainer = make_trainer(model=model, args=args, train_examples=examples, eval_examples=[],
                           batches=train_batches(examples, 4, 1 << 20, 0), pad_id=tok.pad_token_id,
                           pos_weight=1.0, neg_weight=1.0, implicit=False)
    calls = {"n": 0}

    def poison(g):
        calls["n"] += 1
        return g * float("nan") if calls["n"] == 2 else g

    model.score.weight.register_hook(poison)
    trainer.train()
    assert calls["n"] == 3 and trainer.skipped_steps == 1
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_threshold_is_fitted_on_validation_problems_only(tmp_path):
    from transformers import AutoTokenizer

    from pipeline.bundled import MODEL_DIR
    from pipeline.training.collate import DEFAULT_SEPARATOR, PrmFormat
    from pipeline.training.options import TrainConfig
    from pipeline.training.targets import prepare, problem_group

    rows = _exact_corpus(tmp_path / "corpus", n=120)
    tok = AutoTokenizer.from_pretrained(str(MODEL_DIR))
    from pipeline.training.collate import ensure_separator

    sep_id, _ = ensure_separator(tok, DEFAULT_SEPARATOR)
    cfg = TrainConfig(corpus=str(tmp_path / "corpus"), output=str(tmp_path / "o"), val_fraction=0.3)
    prep = prepare(cfg, tok, PrmFormat(), sep_id)
    val_problems = {r["problem"] for r in rows if problem_group(r["problem"]) < 0.3}
    assert prep.outcome_rows and prep.val_rows
    assert {r["problem"] for r in prep.outcome_rows} <= val_problems  # never a training row
    assert {r["id"] for r in prep.outcome_rows} <= {r["id"] for r in prep.val_rows}


def test_outcome_rule_labels_every_step_with_the_solutions_grade(tmp_path):
    from transformers import AutoTokenizer

    from pipeline.bundled import MODEL_DIR
    from pipeline.training.collate import DEFAULT_SEPARATOR, PrmFormat, ensure_separator
    from pipeline.training.options import TrainConfig
    from pipeline.training.targets import prepare

    rows = _exact_corpus(tmp_path / "corpus", n=40)
    tok = AutoTokenizer.from_pretrained(str(MODEL_DIR))
    sep_id, _ = ensure_separator(tok, DEFAULT_SEPARATOR)
    cfg = TrainConfig(corpus=str(tmp_path / "corpus"), output=str(tmp_path / "o"), label_rule="outcome",
                      val_fraction=0.0)
    assert cfg.drop_after_first_error  # the default: it must not cut an outcome model's targets
    prep = prepare(cfg, tok, PrmFormat(), sep_id)
    wrong = [ex for ex in prep.train if ex.targets and ex.targets[0] == 0.0]
    assert wrong, "the sample has wrong solutions"
    for ex, r in zip(prep.train, rows, strict=True):
        assert len(ex.targets) == len(r["steps"])
        assert len(set(ex.targets)) == 1  # one grade for every step, none cut after step 1


def test_truncation_is_counted_and_the_prm_folder_is_the_model_alone(tmp_path):
    import safetensors
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pipeline.bundled import MODEL_DIR
    from pipeline.training.train import train

    _exact_corpus(tmp_path / "corpus", n=16)
    torch.set_num_threads(1)
    # a base model published in bf16 (as most LMs are): the PRM is saved in bf16 too, not in float32
    base = tmp_path / "base-bf16"
    AutoModelForCausalLM.from_pretrained(str(MODEL_DIR), dtype=torch.bfloat16).save_pretrained(base)
    AutoTokenizer.from_pretrained(str(MODEL_DIR)).save_pretrained(base)
    res = train(_cfg(tmp_path, "prm", max_length=120, save_steps=1, val_fraction=0.3, base_model=str(base)))
    d = res.card["data"]
    assert d["steps_cut"] > 0 and 0 < d["rows_cut"] <= d["rows"]
    out = tmp_path / "prm"
    assert not (out / "checkpoints").exists()  # written (--save-steps) and removed after the run
    with safetensors.safe_open(str(out / "model.safetensors"), "pt") as f:
        dtypes = {f.get_tensor(k).dtype for k in f.keys()}
    assert dtypes == {torch.bfloat16}
    from transformers import AutoModelForTokenClassification

    assert AutoModelForTokenClassification.from_pretrained(str(out)).config.mcprm_prm["kind"] == "head"
    kept = train(_cfg(tmp_path, "prm2", save_steps=1, keep_checkpoints=True))
    assert any((tmp_path / "prm2" / "checkpoints").glob("checkpoint-*")) and kept.card


def test_the_head_runs_without_the_padding_mask_and_gives_the_same_outputs(tmp_path):
    """Training drops the padding mask for the head kind (the causal flash kernel instead of the masked one): on
    right-padded rows of a causal LM every real position's logits are those of a masked run, and so is the loss
    the Trainer computes. A left-padded batch would differ; the collator pads on the right."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    from pipeline.bundled import MODEL_DIR
    from pipeline.training.collate import PrmFormat, collate, ensure_separator, make_example, step_loss

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(MODEL_DIR))
    sep, _ = ensure_separator(tok, "\n")
    model = AutoModelForTokenClassification.from_pretrained(str(MODEL_DIR), num_labels=2).eval()
    fmt = PrmFormat(separator="\n", step_suffix="")
    rows = [json.loads(x) for x in SAMPLE_PATH.read_text().splitlines()[:6]]
    ex = [make_example(tok, fmt, sep, r["problem"], r["steps"][: 1 + i % 4], [1.0] * (1 + i % 4))
          for i, r in enumerate(rows)]
    assert len({len(e.input_ids) for e in ex}) > 1  # some rows are padded
    b = collate(ex, tok.pad_token_id or 0)
    with torch.no_grad():
        masked = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
        plain = model(input_ids=b["input_ids"]).logits
    real = b["attention_mask"].bool()
    assert torch.allclose(masked[real], plain[real], atol=1e-5)
    assert float(step_loss(masked, b["soft_labels"], b["label_weights"])) == pytest.approx(
        float(step_loss(plain, b["soft_labels"], b["label_weights"])), rel=1e-6)
    left = torch.roll(b["input_ids"], 3, dims=1)  # a pad in front of real tokens changes them: the check can fail
    with torch.no_grad():
        shifted = model(input_ids=left).logits
    assert not torch.allclose(shifted[:, 3:][real[:, :-3]], masked[:, :-3][real[:, :-3]], atol=1e-3)


def test_compile_layers_finds_every_decoder_layer_and_keeps_the_weights_names(tmp_path):
    from transformers import AutoModelForTokenClassification

    from pipeline.bundled import MODEL_DIR
    from pipeline.training.trainer import compile_layers

    model = AutoModelForTokenClassification.from_pretrained(str(MODEL_DIR), num_labels=2)
    names = list(model.state_dict())
    assert compile_layers(model) == model.config.num_hidden_layers
    assert list(model.state_dict()) == names  # saving and KeepBest see the same keys
