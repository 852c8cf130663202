"""``mcprm train CORPUS --output DIR``: a discriminative PRM from a labeled corpus (pipeline.training.train)."""

from __future__ import annotations

import inspect
import sys
import typing

import typer

from cli.common import CORPUS_DEFAULT, Corpus, Version, echo, free_gpus, repeat_warnings, user_errors
from cli.options import field_param, given


def register(app: typer.Typer) -> None:
    app.command("train")(train_cmd)


def train_cmd(corpus: Corpus = CORPUS_DEFAULT, version: Version = None, **options) -> None:
    """Train a PRM on the corpus's labels: a token-classification head read after each step, or an implicit PRM
    (the LM's own log-likelihood ratio; the default kind for a base model under 50 M parameters).

    Several GPUs: `accelerate launch -m cli.main train ...` or `torchrun --nproc-per-node N -m cli.main train ...`
    (docs/training.md)."""
    from pipeline.training.train import TrainConfig, train

    free_gpus("mcprm train")  # a warm vLLM engine kept by `mcprm label --keep-warm` would hold the GPU's memory
    repeat_warnings(corpus, version)  # labels that mean nothing make a PRM that means nothing: said first
    set_here = given(options)
    for name in ("separator", "step_suffix"):  # typed on a command line: \\n is a newline
        if name in set_here:
            set_here[name] = _unescape(set_here[name])
    with user_errors(extra=(ValueError,)):
        cfg = TrainConfig(corpus=corpus, version=version, **set_here)
        lines = cfg.progress
        # a bar only on a terminal: piped to a file it is escapes and loss dictionaries
        cfg.progress = cfg.progress and sys.stderr.isatty()
        res = train(cfg, progress_lines=lines)
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


def _signature() -> inspect.Signature:
    """The corpus argument and --version (shared by the commands that read a corpus, cli/common.py), then every
    option of :class:`pipeline.training.options.TrainConfig` as it is declared there."""
    import dataclasses

    from pipeline.training.options import TrainConfig

    hints = typing.get_type_hints(TrainConfig)
    kw = inspect.Parameter.POSITIONAL_OR_KEYWORD
    own = [inspect.Parameter("corpus", kw, default=CORPUS_DEFAULT, annotation=Corpus),
           inspect.Parameter("version", kw, default=None, annotation=Version)]
    return inspect.Signature(own + [field_param(f, hints[f.name]) for f in dataclasses.fields(TrainConfig)
                                    if f.metadata.get("cli", True)])


train_cmd.__signature__ = _signature()  # type: ignore[attr-defined]  # the options, from TrainConfig's fields
