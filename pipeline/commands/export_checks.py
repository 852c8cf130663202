"""The check every exported record passes before anything is written (:func:`check_row`, the format's own
:meth:`~pipeline.commands.exporters.base.Exporter.check`): the record parses back to the row's steps and labels,
and with a tokenizer the tag / placeholder / separator is the single token the trainer looks for, once per step
(:class:`Encoded`, in :mod:`pipeline.commands.export_tokens`, batch-encodes a group of records)."""

from __future__ import annotations

from pipeline.commands.export_common import ExportOptions, Row
from pipeline.commands.export_tokens import Encoded, load_tokenizer
from pipeline.commands.exporters import get_exporter

__all__ = ["Encoded", "check_row", "load_tokenizer"]


def check_row(record: dict, row: Row, opts: ExportOptions, tokenizer=None) -> None:
    """Raise :class:`ExportError` naming ``row.id`` unless ``record`` carries exactly ``row``'s steps and labels
    (the format's :meth:`~pipeline.commands.exporters.base.Exporter.check`)."""
    get_exporter(opts.fmt).check(record, row, opts, tokenizer)
