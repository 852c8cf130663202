"""``mcprm export OUT --format FMT --output DIR``: the corpus in the format a PRM trainer reads."""

from __future__ import annotations

import inspect
import json
from typing import Annotated

import typer

from cli.common import CORPUS_DEFAULT, AsJson, Corpus, Version, echo, err, repeat_warnings, user_errors
from pipeline.export import export_corpus
from pipeline.export.common import ALL_FORMATS, FILE_FORMATS
from pipeline.export.formats import get_exporter

# every default is export_corpus's own (declared once, there); the CLI's output folder is its only addition
_D = {name: p.default for name, p in inspect.signature(export_corpus).parameters.items()}


def register(app: typer.Typer) -> None:
    app.command("export")(export_cmd)


def export_cmd(
    corpus: Corpus = CORPUS_DEFAULT,
    fmt: Annotated[str, typer.Option("--format", help=" | ".join(ALL_FORMATS))] = ALL_FORMATS[0],
    output: Annotated[str, typer.Option(help="Export folder (any fsspec URL); part-NNNNN shards go there.")] = "./mcprm-export",
    label_rule: Annotated[str, typer.Option(help="hard (mc_value > 0) | threshold (mc_value >= --threshold) | "
                                                 "soft (mc_value as a float; qwen-prm and openrlhf only) | relative | advantage | "
                                                 "er-prm | changepoint (hard labels from the stored counts; "
                                                 "docs/labels.md)")] = _D["label_rule"],
    threshold: Annotated[float, typer.Option(help="For --label-rule threshold.")] = _D["threshold"],
    min_confidence: Annotated[float | None, typer.Option(help="Drop rows whose first-error confidence is below "
                                                               "this (docs/labels.md).")] = None,
    weight_by_confidence: Annotated[bool, typer.Option(help="Add a 'weight' column: the row's first-error "
                                                            "confidence.")] = False,
    drop_after_first_error: Annotated[bool, typer.Option(
        help="Keep steps only up to the first negative one (PRM800K / ProcessBench / Qwen convention).")
    ] = _D["drop_after_first_error"],
    balance: Annotated[str | None, typer.Option(help="'downsample': as many error-free solutions as solutions "
                                                     "with an error.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of --balance downsample.")] = _D["seed"],
    step_tag: Annotated[str | None, typer.Option(help="Per-step marker (math-shepherd 'ки', qwen-prm '<extra_0>', "
                                                      "trl step_separator '\\n').")] = None,
    placeholder: Annotated[str | None, typer.Option(help="openrlhf placeholder token (default 'ки').")] = None,
    reward_tokens: Annotated[str, typer.Option(help="Positive and negative label tokens, comma-separated.")
                             ] = ",".join(_D["reward_tokens"]),
    tokenizer: Annotated[str | None, typer.Option(help="The trainer's tokenizer (path or hub name): check that "
                                                       "the tag is one token, once per step.")] = None,
    file_format: Annotated[str, typer.Option(help=" | ".join(FILE_FORMATS))] = _D["file_format"],
    shard_rows: Annotated[int, typer.Option(help="Rows per output shard.")] = _D["shard_rows"],
    version: Version = None,
    verify: Annotated[bool, typer.Option("--verify", help="Check every shard's sha256, schema and rows first.")] = _D["verify"],
    overwrite: Annotated[bool, typer.Option(help="Replace an earlier export in --output.")] = _D["overwrite"],
    as_json: AsJson = False,
    consensus: Annotated[str | None, typer.Option(
        metavar="JUDGE-ID", help="Keep only rows where this judge (`mcprm judge`; 'auto': the only one) and MC "
                                 "agree on the first error; null and unjudged rows are dropped.")] = None,
) -> None:
    """Write the corpus as TRL / Math-Shepherd / Qwen-PRM / OpenRLHF / ProcessBench rows or GenPRM critique
    records, checked row by row."""
    import dataclasses

    toks = tuple(t for t in reward_tokens.split(","))
    if len(toks) != 2 or not all(toks):
        err(f"--reward-tokens must be two comma-separated tokens like '+,-', got {reward_tokens!r}")
        raise typer.Exit(1)
    with user_errors():  # CorpusError, ExportError: pipeline.errors
        res = export_corpus(corpus, fmt, output, version=version, verify=verify, label_rule=label_rule, threshold=threshold,
                            drop_after_first_error=drop_after_first_error, balance=balance, seed=seed,
                            step_tag=step_tag, placeholder=placeholder, reward_tokens=toks,  # type: ignore[arg-type]
                            tokenizer=tokenizer, file_format=file_format, shard_rows=shard_rows,
                            overwrite=overwrite, min_confidence=min_confidence,
                            weight_by_confidence=weight_by_confidence, consensus=consensus)
    if as_json:
        print(json.dumps(dataclasses.asdict(res), indent=2))
        repeat_warnings(corpus, version)
        return
    kept_whole = get_exporter(res.format).keeps_all_steps  # processbench: the steps after the first error
    unl = (f", {res.unlabeled:,} unlabeled" + (" (after the first error)" if kept_whole else "")
           if res.unlabeled else "")
    echo(f"wrote {res.rows:,} of {res.corpus_rows:,} corpus rows ({res.steps:,} steps: {res.positives:,} positive, "
         f"{res.negatives:,} negative{unl}{', soft labels' if res.soft else ''}) as {res.format} to {res.output} in "
         f"{len(res.files)} {res.file_format} file(s)")
    for why, n in res.skipped.items():
        echo(f"  rows not exported ({why}): {n:,}")
    for why, n in res.cut.items():
        echo(f"  steps cut ({why}): {n:,}")
    for note in res.notes:
        echo(f"  note: {note}")
    if label_rule == "hard" and min_confidence is None and not consensus and not balance:
        why = _against_stats(corpus, version, res)
        if why:
            echo(f"  {why}")
    repeat_warnings(corpus, version)


def _against_stats(corpus, version, res) -> str | None:
    """Why this export's positive/negative step counts differ from `mcprm stats`' (which counts every labeled
    step of the corpus), or None when they agree: a trainer row is a labeled prefix, cut at its first unlabeled
    step (binary-search leaves steps unlabeled, and a later step may still carry a label), and
    --drop-after-first-error cuts after the first negative step."""
    from pipeline.corpus import corpus_stats

    try:
        lab = corpus_stats(corpus, version)["labels"]
    except Exception:  # noqa: BLE001 - the export itself succeeded; this line only explains its counts
        return None
    # steps unlabeled in the corpus that the export settles as positive (fill_holes) are not among stats' ones
    dp, dn = lab["positive"] + res.filled - res.positives, lab["negative"] - res.negatives
    if dp == 0 and dn == 0:
        return None
    causes = [f"{what} ({n:,} steps)" for what, n in (
        ("each row cut at its first unlabeled step: a trainer row is a labeled prefix", res.cut.get("unlabeled", 0)),
        ("cut after the first negative step (--drop-after-first-error)", res.cut.get("after_first_error", 0)),
    ) if n] + [f"rows not exported: {why} ({n:,})" for why, n in res.skipped.items()]
    filled = (f" (and adds {res.filled:,} unlabeled steps as positive: they come before a step that reached the "
              "answer or before their row's first error)") if res.filled else ""
    return (f"`mcprm stats` counts {lab['positive']:,} positive / {lab['negative']:,} negative labeled steps in the "
            f"corpus; this export leaves out {dp:,} of the positive and {dn:,} of the negative{filled}: "
            + "; ".join(causes))

