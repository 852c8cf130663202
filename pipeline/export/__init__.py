"""Export a labeled corpus in the formats PRM trainers read, checking every row before it is written.

Formats (one record per solution; every record also carries the corpus ``id``):

* ``trl``: TRL stepwise supervision, ``prompt`` / ``completions`` (the steps) / ``labels`` (bool per step).
  TRL's ``PRMTrainer`` tokenizes each step, appends ``step_separator`` and puts the label on the separator's
  last token. It casts labels with ``int()``, so soft labels are refused (they would silently become 0).
* ``math-shepherd``: ``input`` = problem, a space, then ``"{step} ки"`` per step joined by newlines;
  ``label`` = the same text with each tag replaced by ``+`` or ``-`` (peiyi9979/Math-Shepherd).
* ``qwen-prm``: ``text`` = the chat-formatted conversation (Qwen2.5-Math-PRM system prompt, the problem as
  user turn, the steps each followed by ``<extra_0>`` as assistant turn); ``labels`` per step (bool, or
  float with ``label_rule="soft"``).
* ``openrlhf``: OpenRLHF's process reward dataset (``--input_key input --label_key value
  --placeholder_token ки --reward_tokens + -``): ``input`` as in math-shepherd, ``value`` = ``["+", "-", ...]``
  or, with soft labels, floats.
* ``processbench``: ``problem``, ``steps``, ``label`` = index of the first wrong step or -1,
  ``final_answer_correct``. All steps are kept (the label says where the error is).
* ``genprm``: a critique prompt and its target, the first wrong step's index, for a generative verifier
  (:mod:`~pipeline.export.formats.genprm`, a run of its own: solution-level records and counts).

Label rules: ``hard`` = the corpus's hard label (``mc_value > 0``: some continuation reached the answer);
``threshold`` = ``mc_value >= threshold``; ``soft`` = ``mc_value`` itself. Steps labeled by inference without
rollouts (``trust_correct``, binary-search positives) have no ``mc_value``; they keep their hard label (1.0
as a soft label) and are counted in :attr:`ExportResult.imputed`.

An unlabeled step that the row's own labels settle is exported as positive: one before a step that reached the
answer (that step's prefix holds it and reaches the gold answer) or before the row's first negative step (so
the first error survives; ``fill_holes``, counted in :attr:`ExportResult.filled`). Rows are then cut before
their first step still unlabeled (trainers cannot take a null label), and, with
``drop_after_first_error`` (the PRM800K / ProcessBench / Qwen convention), after their first negative step.
``balance="downsample"`` keeps as many all-positive solutions as solutions with an error (seeded by
content key), the other way round when errors are the majority.

Every record is checked before anything is written (the format's :meth:`Exporter.check
<pipeline.export.formats.base.Exporter.check>`): the record is parsed back and must give the same steps and
labels; the tag must occur exactly once per step; and with a tokenizer, the tag / placeholder / separator must
encode to the single token the trainer looks for, occurring once per step in the encoded row. A violation raises
:class:`~pipeline.export.common.ExportError` naming the row; nothing is written.

The package: this module (:func:`export_corpus`: the options every format shares, checked, then the format's
exporter runs); :mod:`~pipeline.export.formats` (the registry, and one module a format: its record, read back,
schema, checks and, for genprm, its own run; the :class:`Exporter <pipeline.export.formats.base.Exporter>`
interface in ``base``); :mod:`~pipeline.export.rows` (the per-step run: labels, cuts, balance, shards);
:mod:`~pipeline.export.columns` (whole-column trl / processbench, ``--balance``'s mask);
:mod:`~pipeline.export.tokens` (the tokenizer side of the checks); :mod:`~pipeline.export.common` (names,
request, options, row, result, the staged output, the error).
"""

from __future__ import annotations

from typing import Any

from pipeline.export.common import (
    ALL_FORMATS,
    FILE_FORMATS,
    QWEN_SYSTEM,
    ExportError,
    ExportRequest,
    ExportResult,
)
from pipeline.export.formats import EXPORTERS, get_exporter, soft_formats


def export_corpus(
    out_url: str,
    fmt: str,
    output_url: str,
    *,
    version: int | None = None,
    label_rule: str = "hard",
    threshold: float = 0.5,
    drop_after_first_error: bool = True,
    balance: str | None = None,
    seed: int = 0,
    step_tag: str | None = None,
    placeholder: str | None = None,
    reward_tokens: tuple[str, str] = ("+", "-"),
    system_prompt: str = QWEN_SYSTEM,
    tokenizer: Any = None,
    file_format: str = "parquet",
    shard_rows: int = 10_000,
    overwrite: bool = False,
    verify: bool = False,
    batch_rows: int = 8192,
    min_confidence: float | None = None,
    weight_by_confidence: bool = False,
    consensus: str | None = None,
) -> ExportResult:
    """Export corpus ``out_url`` (current version by default) as ``fmt`` into folder ``output_url``: the options
    are checked that every format shares, then the format's exporter runs (:meth:`Exporter.export
    <pipeline.export.formats.base.Exporter.export>`).

    ``step_tag`` overrides the per-format marker (math-shepherd tag, qwen-prm separator, trl
    ``step_separator``); ``placeholder`` is the same for openrlhf. ``tokenizer`` (a path or a tokenizer)
    enables the token checks. Writes ``part-NNNNN.parquet|jsonl`` shards and a hidden ``.mcprm-export.json``.
    """
    if fmt not in EXPORTERS:
        raise ExportError(f"--format must be one of {', '.join(ALL_FORMATS)}, got {fmt!r}")
    if file_format not in FILE_FORMATS:
        raise ExportError(f"--file-format must be one of {', '.join(FILE_FORMATS)}, got {file_format!r}")
    if shard_rows < 1:
        raise ExportError(f"--shard-rows must be at least 1, got {shard_rows}")
    exporter = get_exporter(fmt)
    if label_rule == "soft" and exporter.no_soft is not None:
        raise ExportError(f"--label-rule soft cannot be exported as {fmt}: {exporter.no_soft}. Use --label-rule "
                          f"hard or threshold, or a format that takes soft labels ({', '.join(soft_formats())}).")
    request = ExportRequest(
        version=version, label_rule=label_rule, threshold=threshold, drop_after_first_error=drop_after_first_error,
        balance=balance, seed=seed, step_tag=step_tag, placeholder=placeholder, reward_tokens=tuple(reward_tokens),
        system_prompt=system_prompt, tokenizer=tokenizer, file_format=file_format, shard_rows=shard_rows,
        overwrite=overwrite, verify=verify, batch_rows=batch_rows, min_confidence=min_confidence,
        weight_by_confidence=weight_by_confidence, consensus=consensus)
    return exporter.export(out_url, output_url, request)
