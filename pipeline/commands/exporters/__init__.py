"""The registry of ``mcprm export``'s formats: one :class:`~pipeline.commands.exporters.base.Exporter` per format
(the five trainer formats and genprm), each in its own module; the export run and the checks ask it, never the
format's name."""

from __future__ import annotations

from pipeline.commands.export_common import ALL_FORMATS, ExportError
from pipeline.commands.exporters.base import Exporter
from pipeline.commands.exporters.genprm import GenPrm
from pipeline.commands.exporters.math_shepherd import MathShepherd
from pipeline.commands.exporters.openrlhf import OpenRlhf
from pipeline.commands.exporters.processbench import ProcessBench
from pipeline.commands.exporters.qwen_prm import QwenPrm
from pipeline.commands.exporters.trl import Trl

EXPORTERS: dict[str, Exporter] = {e.name: e for e in (Trl(), MathShepherd(), QwenPrm(), OpenRlhf(), ProcessBench(),
                                                       GenPrm())}


def get_exporter(fmt: str) -> Exporter:
    try:
        return EXPORTERS[fmt]
    except KeyError:
        raise ExportError(f"unknown format {fmt!r}; choose one of {', '.join(ALL_FORMATS)}") from None


def soft_formats() -> list[str]:
    """The formats that take soft labels."""
    return [name for name, e in EXPORTERS.items() if e.no_soft is None]


__all__ = ["EXPORTERS", "Exporter", "get_exporter", "soft_formats"]
