"""``train()``: a discriminative PRM from a labeled corpus, as Qwen2.5-Math-PRM builds one.

A causal LM's body under a 2-class token-classification head (``AutoModelForTokenClassification`` with
``num_labels=2``: e.g. ``LlamaForTokenClassification`` / ``Qwen2ForTokenClassification`` built from the causal
LM's config and weights, the head new), read at a separator token after each step
(:mod:`pipeline.training.collate`); the loss is on the steps' labels only. The output folder loads with plain
transformers (no remote code)::

    AutoModelForTokenClassification.from_pretrained(DIR); AutoTokenizer.from_pretrained(DIR)

and its ``config.json`` carries ``mcprm_prm`` (the input layout, the separator and the first-error threshold).

The HF ``Trainer`` does the optimisation, checkpoints (only with ``--save-steps``, in ``DIR/checkpoints``, removed
after a successful run unless ``--keep-checkpoints``), resume, the progress bar, bf16 and several GPUs (started
with ``accelerate launch`` or ``torchrun``: the Trainer reads the environment they set; nothing here distributes
by itself). What is ours: the targets (any label rule of :mod:`pipeline.labeling.rules`, hard or soft, confidence
filter or weights, class balance), the split by problem, the threshold chosen on the validation problems, and the
training card (``DIR/mcprm_card.json``, ``DIR/README.md``). The saved PRM is in the base model's dtype.

The room's parts: :mod:`~pipeline.training.options` (the settings), :mod:`~pipeline.training.targets` (corpus ->
examples), :mod:`~pipeline.training.base` (the base model under its head), :mod:`~pipeline.training.trainer`
(the Trainer's batches, loss scale, attention kernels and skipped steps), :mod:`~pipeline.training.card` (the
card); this module runs the Trainer and chooses the threshold.
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path

from pipeline.interrupts import raise_if_requested
from pipeline.training.base import (
    count_parameters,
    default_base_model,
    load_base,
    resolve_bf16,
    resolve_compile,
)
from pipeline.training.card import CARD
from pipeline.training.collate import CollateError, PrmFormat
from pipeline.training.options import TINY_PARAMS, TrainConfig, TrainError, TrainInterrupted, TrainResult
from pipeline.training.targets import prepare

log = logging.getLogger("mcprm")



def auto_schedule(kind: str, n_params: int) -> tuple[float, float, float]:
    """(epochs, learning rate, implicit beta) when not given. head: 10 at 1e-3 for a model under TINY_PARAMS (a
    new head on a small body), else 3 at 1e-5. implicit: 6 at 1e-4, beta 1, for a small model (a recipe study on
    the bundled task), else 1 at 1e-6 with beta 0.05 (PRIME's implicit PRM; at beta 1 the 1.5B model's summed
    log-ratio saturated within 17 optimizer steps)."""
    tiny = n_params < TINY_PARAMS
    if kind == "implicit":
        return (6.0, 1e-4, 1.0) if tiny else (1.0, 1e-6, 0.05)
    return (10.0, 1e-3, 1.0) if tiny else (3.0, 1e-5, 1.0)


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


def interrupted_message(cfg: TrainConfig, ckpt_dir: Path) -> str:
    """What Ctrl-C during training leaves and what a rerun does: with checkpoints (--save-steps) ``--resume``
    goes on from the last one; without, nothing was kept (the best epoch is held in memory) and a rerun starts
    over, so the message says how to make the next run resumable."""
    last = [p.name for p in ckpt_dir.glob("checkpoint-*")] if ckpt_dir.is_dir() else []
    if last:
        newest = max(last, key=lambda n: int(n.rsplit("-", 1)[-1]) if n.rsplit("-", 1)[-1].isdigit() else -1)
        return (f"interrupted; {ckpt_dir}/{newest} is the last checkpoint: rerun the same command with --resume "
                "to go on from it")
    every = (f"the first checkpoint (--save-steps {cfg.save_steps}) was not written yet" if cfg.save_steps
             else "this run wrote no checkpoints (--save-steps 0, the default)")
    return (f"interrupted; nothing was saved: {every}, so rerunning starts over. To make a run resumable pass "
            "--save-steps N (a checkpoint every N optimizer steps); after an interrupt, the same command with "
            "--resume goes on from the last one")


def train(cfg: TrainConfig, targets_fn=None, progress_lines: bool = False) -> TrainResult:
    """Train a PRM on ``cfg.corpus`` into ``cfg.output``; see the module doc. ``targets_fn(row) -> (targets,
    first_error, confidence)`` replaces the label rule (benchmarks: the exact checker's labels).
    ``progress_lines`` (with ``cfg.progress`` off): plain progress lines on stderr instead of bars."""
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
    from rollouts.hub import model_problem

    why = model_problem(base, "base model", "--base-model")  # a hub name without network: said at once
    if why:
        raise TrainError(why)
    cfg = cfg.resolved(count_parameters(base))  # auto kind and weighting, by the base model's size
    cfg.validate()  # again: some options hold for one kind only, and auto is decided now
    if cfg.resume and has_ckpt:
        _check_resumed_kind(cfg, ckpt_dir)
    try:
        separator, step_suffix = cfg.layout()
        header, add_bos = _header(cfg, base)
        fmt = PrmFormat(header=header, step_suffix=step_suffix, separator=separator,
                        max_length=cfg.max_length, add_bos=add_bos)
    except CollateError as e:
        raise TrainError(str(e)) from None

    from rollouts.base import require

    require("accelerate", "pip install 'accelerate>=1.1'  (the Hugging Face Trainer needs it)")
    import torch
    from transformers import TrainingArguments, set_seed

    set_seed(cfg.seed)
    threads = None
    if not torch.cuda.is_available():
        from pipeline.config import pin_cpu_threads

        threads = pin_cpu_threads()
    if cfg.resume and not has_ckpt:
        log.warning("--resume: no checkpoint in %s; training from the start", ckpt_dir)
    if not cfg.progress:  # also the weight loading / checkpoint writing bars
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    model, tok, sep_id, added = load_base(base, fmt.separator, cfg.kind, cfg.separator_init)
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
    checkpoints = bool(cfg.save_steps)
    from pipeline.training.trainer import (
        compile_layers,
        make_interrupt_check,
        make_keep_best,
        make_progress_lines,
        make_speed_meter,
        make_trainer,
        train_batches,
    )

    compiled = compile_layers(model) if resolve_compile(cfg) else 0

    world = max(1, int(os.environ.get("WORLD_SIZE", "1")))  # set by torchrun / accelerate launch
    batches = train_batches(prep.train, cfg.batch_size, cfg.max_batch_tokens, cfg.seed, ranks=world)
    optimizer_steps = math.ceil(len(batches) / (cfg.grad_accum * world)) * max(1, math.ceil(epochs))
    args = TrainingArguments(
        output_dir=str(ckpt_dir),
        num_train_epochs=epochs,
        learning_rate=lr,
        per_device_train_batch_size=cfg.batch_size,
        per_device_eval_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        warmup_steps=max(0, math.ceil(cfg.warmup_ratio * optimizer_steps)),
        weight_decay=cfg.weight_decay,
        lr_scheduler_type="linear",
        bf16=bf16,
        # checkpoints only when asked: the best epoch is kept in memory (trainer.KeepBest)
        save_strategy="steps" if checkpoints else "no",
        save_steps=cfg.save_steps or 500,
        save_total_limit=2,
        eval_strategy="epoch" if prep.val else "no",
        logging_strategy="epoch",
        report_to=[],
        disable_tqdm=not cfg.progress,
        remove_unused_columns=False,
        seed=cfg.seed,
        data_seed=cfg.seed,
        dataloader_num_workers=0,
        use_cpu=not torch.cuda.is_available(),
        # every parameter gets a gradient at every step (head and implicit alike); DDP's search for unused ones
        # walks the autograd graph each step and is on by default for a model without gradient checkpointing
        ddp_find_unused_parameters=False,
    )
    keep = make_keep_best()
    meter = make_speed_meter()
    head_only = math.ceil(cfg.head_only_ratio * optimizer_steps) if cfg.kind == "head" else 0
    trainer = make_trainer(model=model, args=args, train_examples=prep.train, eval_examples=prep.val,
                           batches=batches, pad_id=tok.pad_token_id, pos_weight=pos_w, neg_weight=neg_w,
                           implicit=cfg.kind == "implicit",
                           callbacks=[meter, make_interrupt_check(), *([keep] if prep.val else []),
                                      *([make_progress_lines()] if progress_lines and not cfg.progress else [])],
                           head_lr_scale=cfg.head_lr_scale if cfg.kind == "head" else 1.0,
                           head_only_steps=head_only)
    if not cfg.progress:  # no progress bars and no loss dictionaries on stdout: the card and the summary say it
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        trainer.remove_callback(PrinterCallback)
        trainer.remove_callback(ProgressCallback)
    keep.model = trainer.model
    t_train = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=True if (cfg.resume and has_ckpt) else None)
        raise_if_requested()  # a Ctrl-C swallowed on the way out of the last step
    except KeyboardInterrupt:
        raise TrainInterrupted(interrupted_message(cfg, ckpt_dir)) from None
    train_seconds = time.perf_counter() - t_train
    restored = keep.restore()
    batches = trainer.batches
    speed = {"seconds": round(train_seconds, 2), "tokens_per_epoch": batches.tokens,
             "padded_tokens_per_epoch": batches.padded_tokens, "micro_batches_per_epoch": len(batches),
             "tokens_per_s": round(batches.tokens * float(epochs) / train_seconds, 1) if train_seconds > 0 else None,
             **meter.steady(t_train, int(batches.tokens * float(epochs))),
             "skipped_steps": trainer.skipped_steps, "compiled_layers": compiled, "torch_threads": threads}
    card: dict = {}
    if trainer.is_world_process_zero():
        model = trainer.model
        if hasattr(model, "module"):
            model = model.module
        card = _finish(cfg, model, tok, fmt, sep_id, added, base, prep, trainer, n_params,
                       {"epochs": epochs, "learning_rate": lr, **({"beta": beta} if cfg.kind == "implicit" else {}),
                        "pos_weight": pos_w, "neg_weight": neg_w, "max_batch_tokens": cfg.max_batch_tokens,
                        "head_lr_scale": cfg.head_lr_scale, "head_only_steps": head_only,
                        "bf16": bf16, "compile": bool(compiled), "world_size": args.world_size}, t0,
                       best={"restored": restored, "eval_loss": keep.best, "step": keep.step, "epoch": keep.epoch},
                       speed=speed)
        if ckpt_dir.is_dir() and not (checkpoints and cfg.keep_checkpoints):
            import shutil

            # the run finished: its checkpoints (optimizer state and all) go, and so does the folder the Trainer
            # made for them when none were asked for
            shutil.rmtree(ckpt_dir)
    trainer.accelerator.wait_for_everyone()
    return TrainResult(cfg.output, card, time.perf_counter() - t0)


def _header(cfg: TrainConfig, base: str) -> tuple[str, bool]:
    """(header template, whether the tokenizer's own leading special tokens go first) of ``cfg.header_style``:
    a chat template writes its own (a BOS among them), so none are added in front of it."""
    if cfg.header_style != "chat":
        return cfg.header, True
    import transformers

    from pipeline.corpus import open_manifest
    from pipeline.training.base import chat_header

    try:
        tok = transformers.AutoTokenizer.from_pretrained(base)
    except (OSError, ValueError) as e:
        raise TrainError(f"cannot load the tokenizer of {base!r} ({e}); pass --base-model with a causal LM") from None
    return chat_header(tok, open_manifest(cfg.corpus, cfg.version)[1]), False


def _finish(cfg, model, tok, fmt, sep_id, added, base, prep, trainer, n_params, hyper, t0, best=None,
            speed=None) -> dict:
    """Choose the threshold on the validation problems, save model + tokenizer + card (rank 0)."""
    from pipeline.corpus import open_manifest
    from pipeline.training.card import build_card, write_card
    from pipeline.training.metrics import choose_threshold, first_error_at, first_error_f1, outcome_threshold
    from pipeline.training.score import predict_probs

    model.eval()
    val_metrics: dict = {}
    threshold, source = 0.5, ("--threshold-rule 0.5: a step is an error where the PRM finds it more likely "
                              "wrong than right" if cfg.threshold_rule == "0.5" else
                              "default (no validation rows, no graded final answers)")
    # one scoring pass over the rows either choice reads (validation rows are often graded rows too)
    rows = {r["id"]: r for r in (*prep.outcome_rows, *prep.val_rows)}
    scored = dict(zip(rows, predict_probs(model, tok, fmt, sep_id, [(r["problem"], r["steps"]) for r in rows.values()],
                                          batch_size=max(cfg.batch_size, 32)), strict=True))
    # the threshold, fitted on the validation problems only (never on rows the PRM trained on): read from their
    # final answers' grades (exact, every row) where they have both kinds, else the F1-best one against their
    # Monte Carlo first errors (metrics.outcome_threshold says why the grades come first)
    if prep.outcome_rows and cfg.threshold_rule == "outcome":
        got = outcome_threshold([scored[r["id"]] for r in prep.outcome_rows],
                                [r["solution_correct"] for r in prep.outcome_rows])
        if got is not None:
            threshold = got[0]
            source = (f"validation problems' final answers: balanced accuracy {got[1]:.3f} of 'an error found' "
                      f"against 'final answer wrong' on {len(prep.outcome_rows):,} graded validation rows")
    if prep.val_rows:
        probs = [scored[r["id"]] for r in prep.val_rows]
        truth = [r["first_error"] for r in prep.val_rows]
        best_t, _ = choose_threshold(probs, truth)
        if cfg.threshold_rule != "0.5" and (cfg.threshold_rule == "f1" or source.startswith("default")):
            threshold, source = best_t, ("validation problems' labels: the F1-best threshold against their Monte "
                                         "Carlo first errors")
        at = first_error_f1([first_error_at(p, threshold) for p in probs], truth)
        at_half = first_error_f1([first_error_at(p, 0.5) for p in probs], truth)
        val_metrics = {"threshold": threshold, "f1": at["f1"], "acc_error": at["acc_error"],
                       "acc_correct": at["acc_correct"], "f1_at_0.5": at_half["f1"], "f1_best_threshold": best_t,
                       "solutions": at["solutions"], "solutions_with_error": at["solutions_with_error"],
                       "against": f"the corpus's own labels under --label-rule {cfg.label_rule}",
                       **({"in_sample": "the threshold was fitted on these same validation rows"}
                          if not source.startswith("--threshold-rule 0.5") else {})}
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
        # in the base model's dtype (bf16 for most LMs): trained with float32 master weights, stored as the
        # model was published; scoring reads bf16 on a GPU anyway
        from pipeline.training.base import base_dtype

        model.config.mcprm_prm = prm_cfg
        model.to(base_dtype(base))
        model.save_pretrained(out)
        tok.save_pretrained(out)
    card = build_card(cfg, base=base, n_params=n_params, manifest=manifest, fmt=fmt, sep_id=sep_id, added=added,
                      threshold=threshold, counts=prep.counts, hyper=hyper, state=trainer.state,
                      seconds=time.perf_counter() - t0, validation=val_metrics, best=best, speed=speed)
    write_card(out, card)
    return card
