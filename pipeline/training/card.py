"""The training card of a PRM folder: ``mcprm_card.json`` (what was trained on what, how, and how well on the
validation problems) and its ``README.md``; written by :mod:`pipeline.training.train`, read by
:mod:`pipeline.training.score`."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict
from pathlib import Path

from pipeline.training.collate import PrmFormat
from pipeline.training.options import TrainConfig

CARD = "mcprm_card.json"


def build_card(cfg: TrainConfig, *, base: str, n_params: int, manifest: dict, fmt: PrmFormat, sep_id: int,
               added: bool, threshold: float, counts: dict, hyper: dict, state, seconds: float,
               validation: dict, best: dict | None = None, speed: dict | None = None) -> dict:
    """The card's content. ``state``: the Trainer's state (its log, steps and best checkpoint); ``manifest``: the
    corpus version trained on; ``validation``: the first-error metrics at the chosen ``threshold``."""
    history = [h for h in state.log_history if "loss" in h or "eval_loss" in h]
    train_loss = next((h["loss"] for h in reversed(history) if "loss" in h), None)
    eval_loss = next((h["eval_loss"] for h in reversed(history) if "eval_loss" in h), None)
    non_finite = non_finite_steps(state.log_history)
    return {
        "format": "mcprm-prm",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "base_model": base,
        "parameters": n_params,
        "corpus": {"path": cfg.corpus, "version": manifest["version"], "identity": manifest.get("identity"),
                   "strategy": manifest.get("strategy"), "k": manifest.get("k"),
                   "trust_correct": (manifest.get("config") or {}).get("trust_correct"),
                   "schema_version": manifest.get("schema_version")},
        "kind": cfg.kind, "label_rule": cfg.label_rule, "targets": cfg.targets, "min_confidence": cfg.min_confidence,
        "weight_by_confidence": cfg.weight_by_confidence, "class_balance": cfg.class_balance,
        "drop_after_first_error": cfg.drop_after_first_error, "val_fraction": cfg.val_fraction,
        "separator": fmt.separator, "separator_id": sep_id, "separator_added": added,
        "prm_format": fmt.to_dict(), "threshold": threshold,
        "data": {k: (round(v, 3) if isinstance(v, float) else v) for k, v in counts.items()},
        "hyperparameters": {"batch_size": cfg.batch_size, "grad_accum": cfg.grad_accum, "seed": cfg.seed,
                            "warmup_ratio": cfg.warmup_ratio, "max_length": cfg.max_length, **hyper},
        "training": {"train_loss": train_loss, "last_eval_loss": eval_loss, "steps": state.global_step,
                     # the weights kept: those of the evaluation with the lowest validation loss
                     "best_eval_loss": (best or {}).get("eval_loss"), "best_step": (best or {}).get("step"),
                     "best_epoch": (best or {}).get("epoch"),
                     "seconds": round(seconds, 1),
                     # per logged epoch: loss, grad_norm (before clipping), learning rate, eval_loss
                     "history": [{k: h[k] for k in ("epoch", "step", "loss", "grad_norm", "learning_rate", "eval_loss")
                                  if k in h} for h in history],
                     "skipped_steps": (speed or {}).get("skipped_steps", 0),
                     **({"speed": speed} if speed else {}),
                     **({"non_finite": non_finite} if non_finite else {})},
        "validation": validation,
        "config": {k: v for k, v in asdict(cfg).items() if k != "extra"},
        **({"extra": cfg.extra} if cfg.extra else {}),
    }


def write_card(out: Path, card: dict) -> None:
    (out / CARD).write_text(json.dumps(card, indent=2, default=str) + "\n")
    (out / "README.md").write_text(card_markdown(card))


def non_finite_steps(log_history: list[dict]) -> dict | None:
    """Where training went non-finite, from the Trainer's log: ``{"first_epoch", "first_step", "entries"}`` for
    the log entries whose loss, eval_loss or grad_norm is nan/inf, or None. (The Trainer filters nan losses out of
    its logged train loss, so a run that went nan can look finite, as a bf16 run of the real 1.5B model once did.)"""
    bad = [h for h in log_history
           if any(isinstance(h.get(k), (int, float)) and not math.isfinite(h[k]) for k in ("loss", "eval_loss",
                                                                                           "grad_norm"))]
    if not bad:
        return None
    return {"first_epoch": bad[0].get("epoch"), "first_step": bad[0].get("step"), "entries": len(bad)}


def _code(text: str) -> str:
    """Inline code that stays on one line: a newline or tab separator is shown escaped."""
    return "`" + text.replace("\n", "\\n").replace("\t", "\\t") + "`"


def card_markdown(card: dict) -> str:
    v = card.get("validation") or {}
    d = card["data"]
    tr = card["training"]
    implicit = card.get("kind") == "implicit"

    def f(x):
        return "n/a" if x is None else (f"{x:.3f}" if isinstance(x, float) else str(x))

    if implicit:
        what = (f"An implicit PRM on `{card['base_model']}` ({card['parameters']:,} parameters): the step score is the "
                "language model's own log-likelihood ratio against the frozen base model, summed over the solution's "
                f"tokens up to each step's separator {_code(card['separator'])} (Yuan et al. 2024); saved as two causal "
                "LMs, the policy here and the reference in `reference/`.")
    else:
        what = (f"A 2-class token-classification head on `{card['base_model']}` ({card['parameters']:,} parameters), "
                f"read at the separator token {_code(card['separator'])} after each step (Qwen2.5-Math-PRM layout).")
    cut = f"{d.get('steps_cut', 0)} steps of {d.get('rows_cut', 0)} rows" if d.get("steps_cut") else "none"
    lines = [
        "---", "library_name: transformers", f"pipeline_tag: {'text-generation' if implicit else 'token-classification'}",
        "tags: [prm, mcprm]", "---", "",
        "# Process reward model (mcprm)", "",
        what + " Trained by `mcprm train` on Monte Carlo step labels.", "",
        "| | |", "|---|---|",
        f"| corpus | `{card['corpus']['path']}` version {card['corpus']['version']} (strategy "
        f"{card['corpus']['strategy']}, K={card['corpus']['k']}) |",
        f"| label rule | {card['label_rule']} ({card['targets']} targets) |",
        f"| min confidence / weighted | {f(card['min_confidence'])} / {card['weight_by_confidence']} |",
        f"| rows: train / validation | {d['train_rows']} / {d['val_rows']} (split by problem: {d['train_problems']}"
        f" / {d['val_problems']} problems) |",
        f"| rows left out | {d['skipped'] or 'none'} |",
        f"| steps cut by max length {card['hyperparameters'].get('max_length')} | {cut} |",
        f"| training steps labeled | {d['train_steps']} (positive weight {f(d['train_positive'])}, negative "
        f"{f(d['train_negative'])}) |",
        f"| first-error threshold | {f(card['threshold'])} (from {v.get('threshold_from', 'n/a')}) |",
        f"| validation first-error F1 | {f(v.get('f1'))} (acc_error {f(v.get('acc_error'))}, acc_correct "
        f"{f(v.get('acc_correct'))}; at 0.5: {f(v.get('f1_at_0.5'))}) against {v.get('against', 'n/a')}; the "
        "threshold was fitted on these rows, so this is not a held-out number |",
        f"| train loss / best validation loss | {f(tr['train_loss'])} / {f(tr.get('best_eval_loss'))} (the weights "
        f"kept: step {tr.get('best_step')}) |",
        f"| optimizer steps skipped (non-finite gradient) | {tr.get('skipped_steps', 0)} |", "",
        *(_implicit_use() if implicit else _head_use()),
        "```", "", "Or `mcprm score DIR --input SOLUTIONS.jsonl --output SCORED` (the PRM's scores alone; "
        "`--use-answer-key` adds the gold answer's grade of the last step).", "",
    ]
    return "\n".join(lines)


def _implicit_use() -> list[str]:
    return [
        "## Use (an implicit PRM: two causal LMs)", "", "```python",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        "pol = AutoModelForCausalLM.from_pretrained(DIR); ref = AutoModelForCausalLM.from_pretrained(DIR + "
        "'/reference')",
        "# q_k = sum over the solution's tokens up to step k's separator (header and separators left out) of",
        "#       log p_pol(token) - log p_ref(token), + pol.config.mcprm_prm['bias']; P(step k good) = sigmoid(q_k)",
    ]


def _head_use() -> list[str]:
    return [
        "## Use", "", "```python",
        "from transformers import AutoModelForTokenClassification, AutoTokenizer",
        "m = AutoModelForTokenClassification.from_pretrained(DIR); t = AutoTokenizer.from_pretrained(DIR)",
        "fmt = m.config.mcprm_prm['format']  # header, step_suffix, separator",
        "text = fmt['header'].replace('{problem}', problem) + ''.join(s + fmt['step_suffix'] + fmt['separator'] "
        "for s in steps)",
        "# P(step good) = softmax(logits)[..., 1] at each separator token; first error = first step below "
        "m.config.mcprm_prm['threshold']",
    ]
