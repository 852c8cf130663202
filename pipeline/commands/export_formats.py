"""The five trainer formats of ``mcprm export`` through their exporters (:mod:`pipeline.commands.exporters`, one
module per format): a row as each trainer reads it (:func:`format_row`), read back (:func:`parse_record`), and
each format's Arrow schema (:func:`record_schema`). See :mod:`pipeline.commands.export` for the formats."""

from __future__ import annotations

from typing import Any

from pipeline.commands.export_common import ExportOptions, Row
from pipeline.commands.exporters import get_exporter


def tag_of(opts: ExportOptions) -> str:
    return get_exporter(opts.fmt).tag(opts)


def format_row(row: Row, opts: ExportOptions, tokenizer=None) -> dict:
    """The trainer-facing record of one row."""
    return get_exporter(opts.fmt).record(row, opts, tokenizer)


def parse_record(record: dict, problem: str, opts: ExportOptions, tokenizer=None) -> tuple[list[str], list[Any]]:
    """Read steps and labels back out of a record (the inverse of :func:`format_row`).

    ``processbench`` gives its first-error index as labels ``[True] * label + [False]`` (or all True).
    Raises ``ValueError`` where the record is not what :func:`format_row` would write.
    """
    return get_exporter(opts.fmt).parse(record, problem, opts, tokenizer)


def record_schema(fmt: str, soft: bool):
    return get_exporter(fmt).schema(soft)
