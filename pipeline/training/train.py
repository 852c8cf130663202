"""``train()``: a discriminative PRM from a labeled corpus, as Qwen2.5-Math-PRM builds one.

A causal LM's body under a 2-class token-classification head (``AutoModelForTokenClassification`` with
``num_labels=2``: e.g. ``LlamaForTokenClassification`` / ``Qwen2ForTokenClassification`` built from the causal
LM's config and weights, the head new), read at a separator token after each step
(:mod:`pipeline.training.collate`); the loss is on the steps' labels only. The output folder loads with plain
transformers (no remote code)::

    AutoModelForTokenClassification.from_pretrained(DIR); AutoTokenizer.from_pretrained(DIR)

and its ``config.json`` carries ``mcprm_prm`` (the input layout, the separator and the first-error threshold).

The HF ``Trainer`` does the optimisation, checkpoints (``DIR/checkpoints``), resume, the progress bar, bf16 and
several GPUs (started with ``accelerate launch`` or ``torchrun``: the Trainer reads the environment they set;
nothing here distributes by itself). What is ours: the targets (any label rule of
:mod:`pipeline.labeling.rules`, hard or soft, confidence filter or weights, class balance), the split by
problem, the threshold chosen on the validation problems, and the training card (``DIR/mcprm_card.json``,
``DIR/README.md``).

The room's parts: :mod:`~pipeline.training.options` (the settings), :mod:`~pipeline.training.targets` (corpus ->
examples), :mod:`~pipeline.training.base` (the base model under its head), :mod:`~pipeline.training.card` (the
card); this module runs the Trainer and chooses the threshold.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

from pipeline.training.base import count_parameters, default_base_model, load_base, resolve_bf16
from pipeline.training.card import CARD
from pipeline.training.collate import CollateError, PrmFormat
from pipeline.training.options import TINY_PARAMS, TrainConfig, TrainError, TrainResult
from pipeline.training.targets import prepare

log = logging.getLogger("mcprm")



def auto_schedule(kind: str, n_params: int) -> tuple[float, float, float]:
    """(epochs, learning rate, implicit beta) when not given. head: 10 at 1e-3 for a model under TINY_PARAMS (a
    new head on a small body), else 3 at 1e-5. implicit: 6 at 1e-4, beta 1, for a small model (the recipe study,
    BENCHMARKS.md issue 28), else 1 at 1e-6 with beta 0.05 (PRIME's implicit PRM; at beta 1 the 1.5B model's
    summed log-ratio saturated in 17 steps: BENCHMARKS.md, issue 28 fourth session)."""
    tiny = n_params < TINY_PARAMS
    if kind == "implicit":
        return (6.0, 1e-4, 1.0) if tiny else (1.0, 1e-6, 0.05)
    return (10.0, 1e-3, 1.0) if tiny else (3.0, 1e-5, 1.0)


# ------------------------------------------------------------------ training
class _Examples:
    def __init__(self, examples):
        self.examples = examples

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return self.examples[i]


def _make_trainer_class(pos_weight: float, neg_weight: float, implicit: bool = False):
    from transformers import Trainer

    from pipeline.training.collate import step_loss

    class PrmTrainer(Trainer):
        """The HF Trainer with the loss on the separators' (soft) targets, weighted (collate.step_loss)."""

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            soft = inputs.pop("soft_labels")
            weights = inputs.pop("label_weights")
            inputs.pop("labels", None)
            start = inputs.pop("response_start", None)
            if implicit:  # the implicit PRM sums its log-ratios from where the solution starts
                inputs["response_start"] = start
            out = model(**inputs)
            loss = step_loss(out.logits, soft, weights, pos_weight, neg_weight)
            return (loss, out) if return_outputs else loss

        def _save(self, output_dir=None, state_dict=None):
            if not implicit:
                return super()._save(output_dir, state_dict)
            # an implicit PRM is no PreTrainedModel: its checkpoint is the trained part's state dict (the frozen
            # reference is rebuilt from the base model), tied tensors written apart (safetensors refuses shared
            # memory); the Trainer loads it back non-strictly (best model, --resume)
            import os

            import safetensors.torch

            out = output_dir or self.args.output_dir
            if self.args.should_save:
                os.makedirs(out, exist_ok=True)
                sd = state_dict if state_dict is not None else self.accelerator.unwrap_model(self.model).state_dict()
                sd = {k: v.detach().clone().contiguous() for k, v in sd.items() if not k.startswith("reference.")}
                safetensors.torch.save_file(sd, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})

        def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
            import torch

            inputs = self._prepare_inputs(inputs)
            with torch.no_grad():
                loss = self.compute_loss(model, dict(inputs))
            return loss.detach(), None, None

    return PrmTrainer


def _check_resumed_kind(cfg: TrainConfig, ckpt_dir: Path) -> None:
    """--resume with another kind than the checkpoints' is a clear error, not an optimizer-state mismatch."""
    import json

    last = max(ckpt_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]) if p.name.split("-")[-1]
               .isdigit() else -1)
    try:
        arch = " ".join(json.loads((last / "config.json").read_text()).get("architectures") or [])
    except (OSError, ValueError):
        return
    was = "head" if "TokenClassification" in arch else "implicit"
    if was != cfg.kind:
        raise TrainError(f"{ckpt_dir} holds checkpoints of a --kind {was} training, this one is --kind {cfg.kind}; "
                         f"resume with --kind {was}, or start again with --overwrite")


def train(cfg: TrainConfig, targets_fn=None) -> TrainResult:
    """Train a PRM on ``cfg.corpus`` into ``cfg.output``; see the module doc. ``targets_fn(row) -> (targets,
    first_error, confidence)`` replaces the label rule (benchmarks: the exact checker's labels)."""
    t0 = time.perf_counter()
    cfg.validate()
    out = Path(cfg.output)
    if out.exists() and out.is_file():
        raise TrainError(f"--output {cfg.output} is a file; give a folder")
    ckpt_dir = out / "checkpoints"
    has_ckpt = ckpt_dir.is_dir() and any(ckpt_dir.glob("checkpoint-*"))
    if (out / CARD).exists() and not (cfg.overwrite or cfg.resume):
        raise TrainError(f"{cfg.output} already holds a trained PRM ({CARD}); pass --overwrite to replace it, or "
                         "choose another --output")
    if has_ckpt and not cfg.resume and not cfg.overwrite:
        raise TrainError(f"{cfg.output} holds checkpoints of an unfinished training; pass --resume to go on from "
                         "the last one, or --overwrite to start again")
    if cfg.overwrite and not cfg.resume and ckpt_dir.is_dir():
        import shutil

        shutil.rmtree(ckpt_dir)
        has_ckpt = False
    base = cfg.base_model or default_base_model(cfg.corpus, cfg.version)
    cfg = cfg.resolved(count_parameters(base))  # auto kind and weighting, by the base model's size
    if cfg.resume and has_ckpt:
        _check_resumed_kind(cfg, ckpt_dir)
    try:
        separator, step_suffix = cfg.layout()
        fmt = PrmFormat(header=cfg.header, step_suffix=step_suffix, separator=separator,
                        max_length=cfg.max_length)
    except CollateError as e:
        raise TrainError(str(e)) from None

    from rollouts.base import require

    require("accelerate", "pip install 'accelerate>=1.1'  (the Hugging Face Trainer needs it)")
    import torch
    from transformers import TrainingArguments, set_seed

    set_seed(cfg.seed)
    if cfg.resume and not has_ckpt:
        log.warning("--resume: no checkpoint in %s; training from the start", ckpt_dir)
    if not cfg.progress:  # also the weight loading / checkpoint writing bars
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    model, tok, sep_id, added = load_base(base, fmt.separator, cfg.kind)
    prep = prepare(cfg, tok, fmt, sep_id, targets_fn)
    c = prep.counts
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    auto_epochs, auto_lr, auto_beta = auto_schedule(cfg.kind, n_params)
    epochs = cfg.epochs if cfg.epochs is not None else auto_epochs
    lr = cfg.learning_rate if cfg.learning_rate is not None else auto_lr
    beta = cfg.beta if cfg.beta is not None else auto_beta
    if cfg.kind == "implicit":
        model.beta = beta
    pos_w = neg_w = 1.0
    if cfg.class_balance and c["train_positive"] > 0 and c["train_negative"] > 0:
        tot = c["train_positive"] + c["train_negative"]
        pos_w, neg_w = tot / (2 * c["train_positive"]), tot / (2 * c["train_negative"])
    bf16 = resolve_bf16(cfg)
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    args = TrainingArguments(
        output_dir=str(ckpt_dir),
        num_train_epochs=epochs,
        learning_rate=lr,
        per_device_train_batch_size=cfg.batch_size,
        per_device_eval_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        warmup_steps=max(0, math.ceil(cfg.warmup_ratio * _steps(len(prep.train), cfg, epochs))),
        weight_decay=cfg.weight_decay,
        lr_scheduler_type="linear",
        bf16=bf16,
        save_strategy="steps" if cfg.save_steps else "epoch",
        save_steps=cfg.save_steps or 500,
        save_total_limit=2,
        eval_strategy=("steps" if cfg.save_steps else "epoch") if prep.val else "no",
        eval_steps=cfg.save_steps or None,
        # the checkpoint with the lowest validation loss is the PRM (a small corpus overfits in a few epochs)
        load_best_model_at_end=bool(prep.val),
        metric_for_best_model="eval_loss" if prep.val else None,
        greater_is_better=False if prep.val else None,
        logging_strategy="epoch",
        report_to=[],
        disable_tqdm=not cfg.progress,
        remove_unused_columns=False,
        seed=cfg.seed,
        data_seed=cfg.seed,
        dataloader_num_workers=0,
        use_cpu=not torch.cuda.is_available(),
    )
    pad = tok.pad_token_id

    def collator(batch):
        from pipeline.training.collate import collate

        return collate(batch, pad)

    trainer = _make_trainer_class(pos_w, neg_w, implicit=cfg.kind == "implicit")(
        model=model, args=args, train_dataset=_Examples(prep.train),
        eval_dataset=_Examples(prep.val) if prep.val else None, data_collator=collator)
    trainer.train(resume_from_checkpoint=True if (cfg.resume and has_ckpt) else None)
    card: dict = {}
    if trainer.is_world_process_zero():
        model = trainer.model
        if hasattr(model, "module"):
            model = model.module
        card = _finish(cfg, model, tok, fmt, sep_id, added, base, prep, trainer, n_params,
                       {"epochs": epochs, "learning_rate": lr, **({"beta": beta} if cfg.kind == "implicit" else {}),
                        "pos_weight": pos_w, "neg_weight": neg_w,
                        "bf16": bf16, "world_size": args.world_size}, t0)
    trainer.accelerator.wait_for_everyone()
    return TrainResult(cfg.output, card, time.perf_counter() - t0)


def _steps(n: int, cfg: TrainConfig, epochs: float) -> int:
    return max(1, math.ceil(n / (cfg.batch_size * cfg.grad_accum)) * max(1, math.ceil(epochs)))


def _finish(cfg, model, tok, fmt, sep_id, added, base, prep, trainer, n_params, hyper, t0) -> dict:
    """Choose the threshold on the validation problems, save model + tokenizer + card (rank 0)."""
    from pipeline.storage.corpus import open_manifest
    from pipeline.training.card import build_card, write_card
    from pipeline.training.metrics import choose_threshold, first_error_at, first_error_f1, outcome_threshold
    from pipeline.training.score import predict_probs

    model.eval()
    val_metrics: dict = {}
    threshold, source = 0.5, "default (no validation rows, no graded final answers)"
    # one scoring pass over the rows either choice reads (validation rows are often graded rows too)
    rows = {r["id"]: r for r in (*prep.outcome_rows, *prep.val_rows)}
    scored = dict(zip(rows, predict_probs(model, tok, fmt, sep_id, [(r["problem"], r["steps"]) for r in rows.values()],
                                          batch_size=max(cfg.batch_size, 32)), strict=True))
    # the threshold: read from the final answers' grades (exact, every row) where the corpus has both kinds,
    # else the F1-best one on the validation rows (metrics.outcome_threshold says why)
    if prep.outcome_rows:
        got = outcome_threshold([scored[r["id"]] for r in prep.outcome_rows],
                                [r["solution_correct"] for r in prep.outcome_rows])
        if got is not None:
            threshold = got[0]
            source = (f"outcome: balanced accuracy {got[1]:.3f} of 'an error found' against 'final answer wrong' "
                      f"on {len(prep.outcome_rows):,} graded rows")
    if prep.val_rows:
        probs = [scored[r["id"]] for r in prep.val_rows]
        truth = [r["first_error"] for r in prep.val_rows]
        best_t, _ = choose_threshold(probs, truth)
        if source.startswith("default"):
            threshold, source = best_t, "validation: the F1-best threshold against the corpus's own labels"
        at = first_error_f1([first_error_at(p, threshold) for p in probs], truth)
        at_half = first_error_f1([first_error_at(p, 0.5) for p in probs], truth)
        val_metrics = {"threshold": threshold, "f1": at["f1"], "acc_error": at["acc_error"],
                       "acc_correct": at["acc_correct"], "f1_at_0.5": at_half["f1"], "f1_best_threshold": best_t,
                       "solutions": at["solutions"], "solutions_with_error": at["solutions_with_error"],
                       "against": f"the corpus's own labels under --label-rule {cfg.label_rule}"}
    val_metrics["threshold_from"] = source
    _, manifest = open_manifest(cfg.corpus, cfg.version)
    prm_cfg = {"format": fmt.to_dict(), "separator_id": sep_id, "threshold": threshold, "positive_label": 1,
               "label_rule": cfg.label_rule, "targets": cfg.targets, "kind": cfg.kind}
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.kind == "implicit":
        from pipeline.training import implicit

        implicit.save(model, tok, out, prm_cfg)
    else:
        model.config.mcprm_prm = prm_cfg
        model.save_pretrained(out)
        tok.save_pretrained(out)
    card = build_card(cfg, base=base, n_params=n_params, manifest=manifest, fmt=fmt, sep_id=sep_id, added=added,
                      threshold=threshold, counts=prep.counts, hyper=hyper, state=trainer.state,
                      seconds=time.perf_counter() - t0, validation=val_metrics)
    write_card(out, card)
    return card
