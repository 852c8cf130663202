"""``mcprm train CORPUS --output DIR``: a discriminative PRM from a labeled corpus (pipeline.training.train)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from cli.common import CORPUS_DEFAULT, Corpus, Version, echo, free_gpus, repeat_warnings, user_errors
from pipeline.training.options import TrainConfig

_D = TrainConfig(corpus="", output="")  # the defaults, declared once (pipeline.training.options)


def register(app: typer.Typer) -> None:
    app.command("train")(train_cmd)


def train_cmd(
    corpus: Corpus = CORPUS_DEFAULT,
    output: Annotated[str, typer.Option("--output", "-o", help="Folder of the trained PRM.")] = "./prm",
    base_model: Annotated[str | None, typer.Option(
        help="Causal LM to start from (folder or hub name). Default: the model that labeled the corpus (the "
             "bundled model for the default); required for a corpus labeled through an OpenAI-compatible "
             "server.")] = None,
    version: Version = None,
    kind: Annotated[str, typer.Option(
        help="head: a 2-class token head read at a separator after each step (Qwen2.5-Math-PRM); implicit: "
             "the step score read through the LM's own head, its log-likelihood ratio against the frozen base "
             "(Yuan et al. 2024), saved as two causal LMs; auto: implicit under 50 M parameters (the bundled "
             "model), head above (docs/training.md).")] = _D.kind,
    label_rule: Annotated[str, typer.Option(
        help="Targets from the stored counts: hard, threshold, soft, relative, advantage, er-prm, changepoint "
             "(any rule `mcprm eval --label-rule` knows), or outcome (every step = the solution's own answer: "
             "an ORM's labels).")] = "hard",
    targets: Annotated[str, typer.Option(help="hard: the rule's labels (0/1); soft: the rule's scores in [0, 1] "
                                              "(cross-entropy against them).")] = "hard",
    min_confidence: Annotated[float | None, typer.Option(
        help="Leave out rows whose first-error confidence is below this.")] = None,
    unreached: Annotated[str, typer.Option(
        help="Rows a --reach-gate labeling could not reach (label_status unreached: their labels say nothing "
             "about the steps): drop, down-weight (x{UNREACHED_WEIGHT}) or keep. Not applied to --label-rule outcome.")
                         ] = _D.unreached,
    weight_by_confidence: Annotated[bool | None, typer.Option(
        help="Weight each row's steps by its first-error confidence (a row without one weighs 1). Default: "
             "with the implicit kind.", show_default=False)] = _D.weight_by_confidence,
    class_balance: Annotated[bool | None, typer.Option(
        help="Weight the two classes inversely to their share of the training steps: the scores then are no "
             "probabilities (the threshold 0.5, prm-min and prm-product read them as such). Default: off for "
             "the head, on for the implicit kind.", show_default=False)] = _D.class_balance,
    threshold_rule: Annotated[str | None, typer.Option(
        help="The first-error threshold: 0.5 (a step more likely wrong than right); outcome (where 'an error "
             "found' best matches 'final answer wrong' on the validation problems, else f1); f1 (the F1-best "
             "one against the validation problems' Monte Carlo first errors). Default: 0.5 without class "
             "balance, else outcome.", show_default=False)] = _D.threshold_rule,
    error_tolerance: Annotated[int, typer.Option(
        help="No loss on this many steps just before a row's first error, where a Monte Carlo first error is "
             "most often a step or two off (SCAN's tolerance).")] = _D.error_tolerance,
    solve_rate_floor: Annotated[float | None, typer.Option(
        help="Down-weight negative targets of problems the completer rarely solves: weight min(1, rate / "
             "FLOOR), rate its success rate on the problem (first-step continuations and final answers of the "
             "problem's rows). Default: off.", show_default=False)] = _D.solve_rate_floor,
    drop_after_first_error: Annotated[bool, typer.Option(
        help="No loss on the steps after a row's first negative one (PRM800K/Qwen convention).")] = True,
    val_fraction: Annotated[float, typer.Option(
        help="Share of problems held out (split by a hash of the problem text). They choose the weights kept "
             "(lowest validation loss) and the first-error threshold: from their final answers' grades where "
             "they have right and wrong ones, else against their Monte Carlo first errors. Never trained on.")] = 0.1,
    epochs: Annotated[float | None, typer.Option(help="Epochs (default: head 3, implicit 1; under 50 M "
                                                      "parameters, e.g. the bundled model: head 10, implicit "
                                                      "6).")] = None,
    learning_rate: Annotated[float | None, typer.Option(help="Peak learning rate (default: head 1e-5, implicit "
                                                             "1e-6; under 50 M parameters: head 1e-3, implicit "
                                                             "1e-4).")] = None,
    beta: Annotated[float | None, typer.Option(help="implicit: the score's scale, beta x (summed log-ratio) + bias "
                                                     "(default: 0.05; under 50 M parameters: 1).")] = None,
    batch_size: Annotated[int, typer.Option(help="Solutions per device per micro-batch, at most (solutions of "
                                                 "similar length go together).")] = _D.batch_size,
    max_batch_tokens: Annotated[int, typer.Option(help="Padded tokens per device per micro-batch, at most (a "
                                                       "batch of long solutions holds fewer).")] = _D.max_batch_tokens,
    grad_accum: Annotated[int, typer.Option(help="Gradient accumulation steps.")] = 1,
    max_length: Annotated[int, typer.Option(help="Most tokens per solution; later steps are cut (counted and "
                                                 "reported).")] = _D.max_length,
    separator: Annotated[str | None, typer.Option(
        help="The step separator token the PRM is read at (added to the tokenizer when it is not one token). "
             "Default: head '<extra_0>'; implicit '\\n' (the newline itself).")] = None,
    step_suffix: Annotated[str | None, typer.Option(
        help="Text after each step, before the separator ('\\n' is a newline). Default: head '\\n'; "
             "implicit ''.")] = None,
    header_style: Annotated[str, typer.Option(
        help="The text before the steps: plain ('Problem: ...' / 'Solution:'), or chat (the base model's chat "
             "template around the problem, with the corpus's own user-message template when it was labeled "
             "with --prompt-format chat).")] = _D.header_style,
    separator_init: Annotated[str, typer.Option(
        help="The embedding of a separator new to the tokenizer: mean (of the trained rows), newline (the "
             "newline's row), none (as the resize left it: untrained).")] = _D.separator_init,
    head_lr_scale: Annotated[float, typer.Option(
        help="--kind head: the new head's learning rate as a multiple of the body's.")] = _D.head_lr_scale,
    head_only_ratio: Annotated[float, typer.Option(
        help="--kind head: this share of the optimizer steps trains the head alone, then the body joins with "
             "its own warm-up (1: the head alone throughout).")] = _D.head_only_ratio,
    bf16: Annotated[str, typer.Option(help="auto (bf16 autocast on a GPU that supports it; float32 for the "
                                           "implicit kind) | on | off")] = _D.bf16,
    compile: Annotated[str, typer.Option(help="auto (torch.compile of each decoder layer on a GPU) | on | off. "
                                              "Costs a one-off compile (tens of seconds) at the first steps.")
                       ] = _D.compile,
    gradient_checkpointing: Annotated[bool, typer.Option(help="Trade compute for memory (large models).")] = False,
    save_steps: Annotated[int, typer.Option(help="Checkpoint every N optimizer steps into DIR/checkpoints, for "
                                                 "--resume (0: no checkpoints; the best epoch is kept in memory)."
                                            )] = _D.save_steps,
    keep_checkpoints: Annotated[bool, typer.Option("--keep-checkpoints", help="Keep DIR/checkpoints after a "
                                                   "successful run (removed by default).")] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Go on from the last checkpoint in DIR/checkpoints "
                                                          "(written with --save-steps).")] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace a PRM or checkpoints in DIR.")] = False,
    seed: Annotated[int, typer.Option(help="Seed of the head's init and the data order.")] = 0,
    limit: Annotated[int | None, typer.Option(help="Train on the first N corpus rows only.")] = None,
    progress: Annotated[bool, typer.Option(help="Progress on stderr: a bar on a terminal, plain lines (one per "
                                                "epoch) when piped to a file.")] = True,
) -> None:
    """Train a PRM on the corpus's labels: a token-classification head read after each step, or an implicit PRM
    (the LM's own log-likelihood ratio; the default kind for a base model under 50 M parameters).

    Several GPUs: `accelerate launch -m cli.main train ...` or `torchrun --nproc-per-node N -m cli.main train ...`
    (docs/training.md)."""
    from pipeline.training.train import TrainConfig, train

    free_gpus("mcprm train")  # a warm vLLM engine kept by `mcprm label --keep-warm` would hold the GPU's memory
    repeat_warnings(corpus, version)  # labels that mean nothing make a PRM that means nothing: said first
    with user_errors(extra=(ValueError,)):
        cfg = TrainConfig(corpus=corpus, output=output, base_model=base_model, version=version, kind=kind,
                          label_rule=label_rule, targets=targets, min_confidence=min_confidence,
                          unreached=unreached, weight_by_confidence=weight_by_confidence, class_balance=class_balance,
                          threshold_rule=threshold_rule, error_tolerance=error_tolerance,
                          solve_rate_floor=solve_rate_floor, header_style=header_style,
                          separator_init=separator_init, head_lr_scale=head_lr_scale,
                          head_only_ratio=head_only_ratio,
                          drop_after_first_error=drop_after_first_error, val_fraction=val_fraction, epochs=epochs,
                          learning_rate=learning_rate, beta=beta, batch_size=batch_size,
                          max_batch_tokens=max_batch_tokens, grad_accum=grad_accum, max_length=max_length,
                          separator=None if separator is None else _unescape(separator),
                          step_suffix=None if step_suffix is None else _unescape(step_suffix), bf16=bf16, compile=compile,
                          gradient_checkpointing=gradient_checkpointing, save_steps=save_steps,
                          keep_checkpoints=keep_checkpoints, resume=resume,
                          overwrite=overwrite, seed=seed, limit=limit,
                          # a bar only on a terminal: piped to a file it is escapes and loss dictionaries
                          progress=progress and sys.stderr.isatty())
        res = train(cfg, progress_lines=progress)
    card = res.card
    if not card:  # not the main process of a multi-GPU run
        return
    v = card.get("validation") or {}
    d = card["data"]
    tr = card["training"]
    sp = tr.get("speed") or {}
    f1 = v.get("f1")
    echo(f"{res.output}: PRM on {card['base_model']} trained on {d['train_rows']:,} rows "
         f"({d['train_steps']:,} labeled steps) of {card['corpus']['path']} v{card['corpus']['version']} "
         f"({card['label_rule']}, {card['targets']} targets) in {res.seconds:.0f} s"
         + (f"; {sp['tokens_per_s']:,.0f} tokens/s" if sp.get("tokens_per_s") else ""))
    if f1 is not None:
        fitted = " (in-sample for the threshold)" if v.get("in_sample") else ""
        echo(f"  validation ({d['val_rows']:,} rows, {d['val_problems']:,} problems): first-error F1 {f1:.3f} at "
             f"threshold {card['threshold']:.2f}, against the corpus's own labels{fitted}")
    else:
        echo(f"  no validation rows with both kinds of solutions: threshold {card['threshold']:.2f}")
    if v.get("threshold_from"):
        echo(f"  threshold {card['threshold']:.2f} from the {v['threshold_from']}")
    if d["skipped"]:
        echo(f"  rows left out: {d['skipped']}")
    warn = []
    if d.get("steps_cut"):
        warn.append(f"{d['steps_cut']:,} steps of {d['rows_cut']:,} rows were past --max-length "
                    f"{card['hyperparameters']['max_length']} tokens and were not trained on; raise --max-length "
                    "to keep them")
    if d["train_positive"] == 0 or d["train_negative"] == 0 or d["train_steps"] < 20:
        warn.append(f"only {d['train_steps']} labeled training steps ({d['train_positive']:.0f} good, "
                    f"{d['train_negative']:.0f} bad): too few, or of one class only, for a PRM to learn to tell "
                    "steps apart; label more solutions")
    if tr.get("skipped_steps"):
        warn.append(f"{tr['skipped_steps']} optimizer steps had a non-finite gradient and were skipped")
    nf = tr.get("non_finite")
    if nf:
        warn.append(f"the loss went non-finite (nan/inf) from epoch {nf['first_epoch']} on; the weights kept are "
                    f"those of step {tr.get('best_step')} (lowest validation loss). Lower --learning-rate, or train "
                    "with --bf16 off")
    for w in warn:
        print(f"  warning: {w}", file=sys.stderr, flush=True)


def _unescape(text: str) -> str:
    """``\\n`` and ``\\t`` as typed on a command line become a newline and a tab (other text is kept as is)."""
    return text.replace("\\n", "\n").replace("\\t", "\t")
