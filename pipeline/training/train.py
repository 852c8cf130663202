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
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipeline.errors import FatalError
from pipeline.training.collate import DEFAULT_HEADER, DEFAULT_SEPARATOR, CollateError, PrmFormat

log = logging.getLogger("mcprm")

CARD = "mcprm_card.json"
PSEUDO_RULES = ("outcome",)  # every step labeled with the solution's own final answer (an ORM's labels)
TINY_PARAMS = 50_000_000  # below this, the auto learning rate / epochs are those of a small model trained from scratch


class TrainError(FatalError, ValueError):
    """The training cannot start or go on; the message says what to change."""


@dataclass
class TrainConfig:
    corpus: str
    output: str
    base_model: str | None = None  # default: the model that labeled the corpus (manifest), else the bundled one
    version: int | None = None
    label_rule: str = "hard"  # any of pipeline.labeling.rules.RULES, or "outcome"
    targets: str = "hard"  # hard: the rule's labels (0/1); soft: the rule's scores in [0, 1]
    min_confidence: float | None = None  # drop rows whose first-error confidence is below this
    weight_by_confidence: bool = False  # weight each row's steps by its first-error confidence
    class_balance: bool = True  # weight the two classes inversely to their frequency in the training steps
    drop_after_first_error: bool = True  # no loss on steps after the first negative one
    val_fraction: float = 0.1  # of problems (hash of the problem text), for the threshold and metrics
    epochs: float | None = None  # auto: 3, or 10 for a small model (< 50 M parameters)
    learning_rate: float | None = None  # auto: 1e-5, or 1e-3 for a small model
    batch_size: int = 16
    grad_accum: int = 1
    warmup_ratio: float = 0.05
    weight_decay: float = 0.0
    max_length: int = 2048
    separator: str = DEFAULT_SEPARATOR
    header: str = DEFAULT_HEADER
    step_suffix: str = "\n"
    bf16: str = "auto"  # auto (on a GPU that supports it) | on | off
    gradient_checkpointing: bool = False
    seed: int = 0
    save_steps: int = 0  # 0: a checkpoint per epoch
    resume: bool = False
    overwrite: bool = False
    progress: bool = True
    limit: int | None = None  # train on the first N rows only (tests, quick looks)
    extra: dict = field(default_factory=dict)

    def validate(self) -> None:
        from pipeline.labeling.rules import RULES

        bad = []
        if self.label_rule not in RULES and self.label_rule not in PSEUDO_RULES:
            bad.append(f"--label-rule must be one of {', '.join([*RULES, *PSEUDO_RULES])}, got {self.label_rule!r}")
        if self.targets not in ("hard", "soft"):
            bad.append(f"--targets must be 'hard' or 'soft', got {self.targets!r}")
        if self.min_confidence is not None and not 0 <= self.min_confidence <= 1:
            bad.append(f"--min-confidence must be in [0, 1], got {self.min_confidence}")
        if not 0 <= self.val_fraction < 1:
            bad.append(f"--val-fraction must be in [0, 1), got {self.val_fraction}")
        if self.epochs is not None and self.epochs <= 0:
            bad.append(f"--epochs must be positive, got {self.epochs}")
        if self.learning_rate is not None and self.learning_rate <= 0:
            bad.append(f"--learning-rate must be positive, got {self.learning_rate}")
        if self.batch_size < 1 or self.grad_accum < 1:
            bad.append("--batch-size and --grad-accum must be at least 1")
        if self.bf16 not in ("auto", "on", "off"):
            bad.append(f"--bf16 must be auto, on or off, got {self.bf16!r}")
        if bad:
            raise TrainError("; ".join(bad))


@dataclass
class TrainResult:
    output: str
    card: dict
    seconds: float


# ------------------------------------------------------------------ corpus -> targets
def problem_group(problem: str) -> float:
    """A problem's place in [0, 1) by the hash of its text: the split by problem is ``group < val_fraction``."""
    h = hashlib.sha256(problem.strip().encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def row_targets(row: dict, rule: str, targets: str = "hard") -> tuple[list[float | None], int, float]:
    """(per-step targets, first error, first-error confidence) of one corpus row under ``rule``.

    ``outcome``: every step gets the solution's own final answer (1.0 right, 0.0 wrong; None when unknown) —
    an outcome reward model's labels. Any rule of :mod:`pipeline.labeling.rules`: hard targets are its labels
    (None stays None), soft targets its scores. The confidence is the changepoint posterior of the first error
    under ``changepoint``, else :func:`pipeline.labeling.rules.first_error_confidence` of the rule's first
    error (from the stored counts; 1.0 for steps without rollouts)."""
    from pipeline.labeling.rules import apply_rule

    n = len(row["steps"])
    if rule == "outcome":
        sc = row.get("solution_correct")
        if sc is None:
            return [None] * n, -1, 0.0
        return [1.0 if sc else 0.0] * n, (-1 if sc else 0), 1.0
    res = apply_rule(row, rule)
    if targets == "soft":
        t = [None if s is None else float(s) for s in res.scores]
    else:
        t = [None if lab is None else (1.0 if lab else 0.0) for lab in res.labels]
    return t, res.first_error, _confidence(row, rule, res)


def _confidence(row: dict, rule: str, res) -> float:
    """How sure the rule's first error is: the changepoint rule's own posterior; else the row's stored posterior
    of that first error (schema 4), else the Jeffreys-posterior confidence from the counts (schema 3); a row
    without rollouts (labeled by its own answer) counts as certain."""
    from pipeline.labeling import rules

    if rule == "changepoint" and res.extra.get("confidence") is not None:
        return float(res.extra["confidence"])
    of = getattr(rules, "confidence_of", None)
    if of is not None:
        c = of(row, res.first_error)
        if c is not None:
            return float(c)
    fec = getattr(rules, "first_error_confidence", None)
    if fec is not None:
        return float(fec(rules.row_steps(dict(row, labels=res.labels)), res.first_error))
    stored = row.get("first_error_confidence")
    if stored is not None and res.first_error == row.get("first_error"):
        return float(stored)
    return 1.0


@dataclass
class Prepared:
    train: list
    val: list  # Examples
    val_rows: list[dict]  # id, problem, steps, first_error (the labels' own) of the validation rows
    counts: dict


def prepare(cfg: TrainConfig, tokenizer, fmt: PrmFormat, sep_id: int,
            targets_fn: Callable[[dict], tuple[list[float | None], int, float]] | None = None) -> Prepared:
    """Read the corpus, compute each row's targets, filter/weight, split by problem, tokenize."""
    from pipeline.storage.corpus import iter_corpus, open_manifest
    from pipeline.training.collate import PieceCache, make_example, targets_until_first_error

    open_manifest(cfg.corpus, cfg.version)  # a clear error for a folder that is no corpus
    fn = targets_fn or (lambda r: row_targets(r, cfg.label_rule, cfg.targets))
    pieces = PieceCache(tokenizer)
    train, val, val_rows = [], [], []
    c = {"corpus_rows": 0, "rows": 0, "train_rows": 0, "val_rows": 0, "train_problems": 0, "val_problems": 0,
         "skipped": {}, "train_steps": 0, "train_positive": 0.0, "train_negative": 0.0, "steps_cut": 0}
    problems = {"train": set(), "val": set()}

    def skip(why: str) -> None:
        c["skipped"][why] = c["skipped"].get(why, 0) + 1

    for b in iter_corpus(cfg.corpus, cfg.version):  # every column: the rules read what the schema version has
        for r in b.to_pylist():
            if cfg.limit is not None and c["corpus_rows"] >= cfg.limit:
                break
            c["corpus_rows"] += 1
            where = f"{cfg.corpus} row {c['corpus_rows'] - 1} (id {r.get('id')!r})"
            steps = list(r["steps"] or [])
            if not steps:
                skip("no_steps")
                continue
            try:
                t, fe, conf = fn(r)
            except (ValueError, KeyError, TypeError) as e:
                raise TrainError(f"{where}: its labels cannot be read under --label-rule {cfg.label_rule} ({e})") from e
            if cfg.drop_after_first_error:
                t = targets_until_first_error(t, [None if x is None else x >= 0.5 for x in t])
            if all(x is None for x in t):
                skip("no_labels")
                continue
            if cfg.min_confidence is not None and conf < cfg.min_confidence:
                skip("low_confidence")
                continue
            weight = conf if cfg.weight_by_confidence else 1.0
            is_val = problem_group(r["problem"]) < cfg.val_fraction
            try:
                ex = make_example(tokenizer, fmt, sep_id, r["problem"], steps, t, weight, pieces)
            except CollateError as e:
                skip("too_long" if "max_length" in str(e) else "bad_row")
                log.warning("%s: %s; left out", where, e)
                continue
            c["steps_cut"] += len(steps) - len(ex.positions)
            c["rows"] += 1
            if is_val:
                val.append(ex)
                problems["val"].add(r["problem"])
                val_rows.append({"id": r["id"], "problem": r["problem"], "steps": steps, "first_error": fe})
            else:
                train.append(ex)
                problems["train"].add(r["problem"])
                for y, w in zip(ex.targets, ex.weights, strict=True):
                    if y is None or w <= 0:
                        continue
                    c["train_steps"] += 1
                    c["train_positive"] += y
                    c["train_negative"] += 1 - y
        else:
            continue
        break
    c["train_rows"], c["val_rows"] = len(train), len(val)
    c["train_problems"], c["val_problems"] = len(problems["train"]), len(problems["val"])
    if c["corpus_rows"] == 0:
        raise TrainError(f"{cfg.corpus} holds no rows: nothing to train on. Label some solutions first "
                         f"(`mcprm label --output {cfg.corpus}`).")
    if not train:
        why = ", ".join(f"{k}: {v}" for k, v in c["skipped"].items()) or "every row went to validation"
        raise TrainError(f"{cfg.corpus}: no row is left to train on ({c['corpus_rows']} rows; {why}). Lower "
                         "--min-confidence or --val-fraction, or choose another --label-rule.")
    return Prepared(train, val, val_rows, c)


# ------------------------------------------------------------------ the base model
def default_base_model(corpus: str, version: int | None = None) -> str:
    """The model that labeled ``corpus`` (its manifest's config), the bundled model when that is the default;
    an error when the corpus was labeled through an OpenAI-compatible server (no local weights)."""
    from pipeline.storage.corpus import open_manifest

    _, m = open_manifest(corpus, version)
    cfg = m.get("config") or {}
    flat: dict = {}
    for k, v in cfg.items():  # the config may be flat or grouped by section
        if isinstance(v, dict):
            flat.update(v)
        else:
            flat[k] = v
    backend = flat.get("backend")
    model = flat.get("model") or ""
    if m.get("strategy") == "prm":
        raise TrainError(f"{corpus} was written by `mcprm score` (PRM scores, not Monte Carlo labels); train on a "
                         "labeled corpus, or pass --base-model and accept the PRM's own labels as targets")
    if backend == "openai":
        raise TrainError(f"{corpus} was labeled through an OpenAI-compatible server (model {model!r}), which has "
                         "no local weights here: pass --base-model PATH_OR_HUB_NAME (a causal LM).")
    if not model:
        from pipeline import bundled

        return str(bundled.model_dir())
    return str(model)


def _resolve_dtype(cfg: TrainConfig):
    import torch

    cuda = torch.cuda.is_available()
    if cfg.bf16 == "on":
        if not cuda:
            raise TrainError("--bf16 on needs a GPU; this machine has none (use --bf16 auto)")
        return True
    if cfg.bf16 == "off":
        return False
    return bool(cuda and torch.cuda.is_bf16_supported())


def load_base(base: str, separator: str):
    """(model, tokenizer, separator id): the causal LM under a fresh 2-class token head, the separator token
    added to the tokenizer (and the embeddings grown) when it lacks it."""
    from rollouts.base import require

    torch = require("torch", "pip install torch")
    transformers = require("transformers", "pip install transformers")
    from pipeline.training.collate import ensure_separator

    p = Path(base)
    if not p.exists() and (base.startswith((".", "/", "~")) or os.sep in base and len(base.split("/")) != 2):
        raise TrainError(f"base model {base!r} does not exist; pass --base-model with a local folder or a hub name")
    try:
        tok = transformers.AutoTokenizer.from_pretrained(base)
        mcfg = transformers.AutoConfig.from_pretrained(base)
    except (OSError, ValueError) as e:
        raise TrainError(f"cannot load the base model {base!r} ({e}); pass --base-model with a causal LM "
                         "(a local folder or a hub name)") from None
    sep_id, added = ensure_separator(tok, separator)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token if tok.eos_token is not None else separator
    with _quiet_head_warning(transformers):
        try:
            # float32 master weights: bf16 is autocast by the Trainer (--bf16), never pure-bf16 AdamW
            model = transformers.AutoModelForTokenClassification.from_pretrained(
                base, num_labels=2, id2label={0: "bad", 1: "good"}, label2id={"bad": 0, "good": 1},
                dtype=torch.float32)
        except ValueError as e:  # no token-classification class for this architecture
            raise TrainError(f"{base} ({mcfg.model_type}) has no AutoModelForTokenClassification class in "
                             f"transformers ({e}); choose a causal LM of a supported family (Llama, Qwen2, "
                             "Mistral, Gemma, ...)") from None
    emb = model.get_input_embeddings().num_embeddings
    if len(tok) > emb:
        model.resize_token_embeddings(len(tok))
    model.config.pad_token_id = tok.pad_token_id
    return model, tok, sep_id, added


class _quiet_head_warning:
    """transformers warns that the new head is untrained: that is the point here."""

    def __init__(self, transformers):
        self.t = transformers

    def __enter__(self):
        self.level = self.t.logging.get_verbosity()
        self.t.logging.set_verbosity_error()

    def __exit__(self, *a):
        self.t.logging.set_verbosity(self.level)


# ------------------------------------------------------------------ training
class _Examples:
    def __init__(self, examples):
        self.examples = examples

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return self.examples[i]


def _make_trainer_class(pos_weight: float, neg_weight: float):
    from transformers import Trainer

    from pipeline.training.collate import step_loss

    class PrmTrainer(Trainer):
        """The HF Trainer with the loss on the separators' (soft) targets, weighted (collate.step_loss)."""

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            soft = inputs.pop("soft_labels")
            weights = inputs.pop("label_weights")
            inputs.pop("labels", None)
            out = model(**inputs)
            loss = step_loss(out.logits, soft, weights, pos_weight, neg_weight)
            return (loss, out) if return_outputs else loss

        def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
            import torch

            inputs = self._prepare_inputs(inputs)
            with torch.no_grad():
                loss = self.compute_loss(model, dict(inputs))
            return loss.detach(), None, None

    return PrmTrainer


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
    try:
        fmt = PrmFormat(header=cfg.header, step_suffix=cfg.step_suffix, separator=cfg.separator,
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
    model, tok, sep_id, added = load_base(base, cfg.separator)
    prep = prepare(cfg, tok, fmt, sep_id, targets_fn)
    c = prep.counts
    n_params = sum(p.numel() for p in model.parameters())
    tiny = n_params < TINY_PARAMS
    epochs = cfg.epochs if cfg.epochs is not None else (10.0 if tiny else 3.0)
    lr = cfg.learning_rate if cfg.learning_rate is not None else (1e-3 if tiny else 1e-5)
    pos_w = neg_w = 1.0
    if cfg.class_balance and c["train_positive"] > 0 and c["train_negative"] > 0:
        tot = c["train_positive"] + c["train_negative"]
        pos_w, neg_w = tot / (2 * c["train_positive"]), tot / (2 * c["train_negative"])
    bf16 = _resolve_dtype(cfg)
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

    trainer = _make_trainer_class(pos_w, neg_w)(
        model=model, args=args, train_dataset=_Examples(prep.train),
        eval_dataset=_Examples(prep.val) if prep.val else None, data_collator=collator)
    trainer.train(resume_from_checkpoint=True if (cfg.resume and has_ckpt) else None)
    card: dict = {}
    if trainer.is_world_process_zero():
        model = trainer.model
        if hasattr(model, "module"):
            model = model.module
        card = _finish(cfg, model, tok, fmt, sep_id, added, base, prep, trainer, n_params,
                       {"epochs": epochs, "learning_rate": lr, "pos_weight": pos_w, "neg_weight": neg_w,
                        "bf16": bf16, "world_size": args.world_size}, t0)
    trainer.accelerator.wait_for_everyone()
    return TrainResult(cfg.output, card, time.perf_counter() - t0)


def _steps(n: int, cfg: TrainConfig, epochs: float) -> int:
    return max(1, math.ceil(n / (cfg.batch_size * cfg.grad_accum)) * max(1, math.ceil(epochs)))


def _finish(cfg, model, tok, fmt, sep_id, added, base, prep, trainer, n_params, hyper, t0) -> dict:
    """Choose the threshold on the validation problems, save model + tokenizer + card (rank 0)."""
    from pipeline.storage.corpus import open_manifest
    from pipeline.training.metrics import choose_threshold, first_error_at, first_error_f1
    from pipeline.training.score import predict_probs

    model.eval()
    val_metrics: dict = {}
    threshold = 0.5
    if prep.val_rows:
        probs = predict_probs(model, tok, fmt, sep_id, [(r["problem"], r["steps"]) for r in prep.val_rows],
                              batch_size=max(cfg.batch_size, 32))
        truth = [r["first_error"] for r in prep.val_rows]
        threshold, at_best = choose_threshold(probs, truth)
        at_half = first_error_f1([first_error_at(p, 0.5) for p in probs], truth)
        val_metrics = {"threshold": threshold, "f1": at_best["f1"], "acc_error": at_best["acc_error"],
                       "acc_correct": at_best["acc_correct"], "f1_at_0.5": at_half["f1"],
                       "solutions": at_best["solutions"], "solutions_with_error": at_best["solutions_with_error"],
                       "against": f"the corpus's own labels under --label-rule {cfg.label_rule}"}
    history = [h for h in trainer.state.log_history if "loss" in h or "eval_loss" in h]
    train_loss = next((h["loss"] for h in reversed(history) if "loss" in h), None)
    eval_loss = next((h["eval_loss"] for h in reversed(history) if "eval_loss" in h), None)
    non_finite = non_finite_steps(trainer.state.log_history)
    _, manifest = open_manifest(cfg.corpus, cfg.version)
    prm_cfg = {"format": fmt.to_dict(), "separator_id": sep_id, "threshold": threshold, "positive_label": 1,
               "label_rule": cfg.label_rule, "targets": cfg.targets}
    model.config.mcprm_prm = prm_cfg
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    card = {
        "format": "mcprm-prm",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "base_model": base,
        "parameters": n_params,
        "corpus": {"path": cfg.corpus, "version": manifest["version"], "identity": manifest.get("identity"),
                   "strategy": manifest.get("strategy"), "k": manifest.get("k"),
                   "schema_version": manifest.get("schema_version")},
        "label_rule": cfg.label_rule, "targets": cfg.targets, "min_confidence": cfg.min_confidence,
        "weight_by_confidence": cfg.weight_by_confidence, "class_balance": cfg.class_balance,
        "drop_after_first_error": cfg.drop_after_first_error, "val_fraction": cfg.val_fraction,
        "separator": fmt.separator, "separator_id": sep_id, "separator_added": added,
        "prm_format": fmt.to_dict(), "threshold": threshold,
        "data": {k: (round(v, 3) if isinstance(v, float) else v) for k, v in prep.counts.items()},
        "hyperparameters": {"batch_size": cfg.batch_size, "grad_accum": cfg.grad_accum, "seed": cfg.seed,
                            "warmup_ratio": cfg.warmup_ratio, "max_length": cfg.max_length, **hyper},
        "training": {"train_loss": train_loss, "last_eval_loss": eval_loss, "steps": trainer.state.global_step,
                     "best_eval_loss": trainer.state.best_metric,
                     "best_checkpoint": trainer.state.best_model_checkpoint,
                     "seconds": round(time.perf_counter() - t0, 1),
                     **({"non_finite": non_finite} if non_finite else {})},
        "validation": val_metrics,
        "config": {k: v for k, v in asdict(cfg).items() if k != "extra"},
        **({"extra": cfg.extra} if cfg.extra else {}),
    }
    (out / CARD).write_text(json.dumps(card, indent=2, default=str) + "\n")
    (out / "README.md").write_text(card_markdown(card))
    return card


def non_finite_steps(log_history: list[dict]) -> dict | None:
    """Where training went non-finite, from the Trainer's log: ``{"first_epoch", "first_step", "entries"}`` for
    the log entries whose loss, eval_loss or grad_norm is nan/inf, or None. (The Trainer filters nan losses out of
    its logged train loss, so a run that went nan can look finite; bf16 on the real 1.5B model did, BENCHMARKS.md.)"""
    bad = [h for h in log_history
           if any(isinstance(h.get(k), (int, float)) and not math.isfinite(h[k]) for k in ("loss", "eval_loss",
                                                                                           "grad_norm"))]
    if not bad:
        return None
    return {"first_epoch": bad[0].get("epoch"), "first_step": bad[0].get("step"), "entries": len(bad)}


def card_markdown(card: dict) -> str:
    v = card.get("validation") or {}
    d = card["data"]

    def f(x):
        return "n/a" if x is None else (f"{x:.3f}" if isinstance(x, float) else str(x))

    lines = [
        "---", "library_name: transformers", "pipeline_tag: token-classification", "tags: [prm, mcprm]", "---", "",
        "# Process reward model (mcprm)", "",
        f"A 2-class token-classification head on `{card['base_model']}` ({card['parameters']:,} parameters), read at "
        f"the separator token `{card['separator']}` after each step (Qwen2.5-Math-PRM layout). Trained by "
        "`mcprm train` on Monte Carlo step labels.", "",
        "| | |", "|---|---|",
        f"| corpus | `{card['corpus']['path']}` version {card['corpus']['version']} (strategy "
        f"{card['corpus']['strategy']}, K={card['corpus']['k']}) |",
        f"| label rule | {card['label_rule']} ({card['targets']} targets) |",
        f"| min confidence / weighted | {f(card['min_confidence'])} / {card['weight_by_confidence']} |",
        f"| rows: train / validation | {d['train_rows']} / {d['val_rows']} (split by problem: {d['train_problems']}"
        f" / {d['val_problems']} problems) |",
        f"| rows left out | {d['skipped'] or 'none'} |",
        f"| training steps labeled | {d['train_steps']} (positive weight {f(d['train_positive'])}, negative "
        f"{f(d['train_negative'])}) |",
        f"| first-error threshold | {f(card['threshold'])} (chosen on the validation problems) |",
        f"| validation first-error F1 | {f(v.get('f1'))} (acc_error {f(v.get('acc_error'))}, acc_correct "
        f"{f(v.get('acc_correct'))}; at 0.5: {f(v.get('f1_at_0.5'))}) against {v.get('against', 'n/a')} |",
        f"| train loss / best validation loss | {f(card['training']['train_loss'])} / "
        f"{f(card['training']['best_eval_loss'])} (the checkpoint kept) |", "",
        "## Use", "", "```python",
        "from transformers import AutoModelForTokenClassification, AutoTokenizer",
        "m = AutoModelForTokenClassification.from_pretrained(DIR); t = AutoTokenizer.from_pretrained(DIR)",
        "fmt = m.config.mcprm_prm['format']  # header, step_suffix, separator",
        "text = fmt['header'].replace('{problem}', problem) + ''.join(s + fmt['step_suffix'] + fmt['separator'] "
        "for s in steps)",
        "# P(step good) = softmax(logits)[..., 1] at each separator token; first error = first step below "
        "m.config.mcprm_prm['threshold']",
        "```", "", "Or `mcprm score DIR --input SOLUTIONS.jsonl --output SCORED`.", "",
    ]
    return "\n".join(lines)
