"""The registry of ``mcprm export``'s formats: one :class:`~pipeline.export.formats.base.Exporter` per format
(the five trainer formats and genprm), each in its own module; the export run and the checks ask it, never the
format's name."""

from __future__ import annotations

from pipeline.export.common import ALL_FORMATS, ExportError
from pipeline.export.formats.base import Exporter
from pipeline.export.formats.genprm import GenPrm
from pipeline.export.formats.math_shepherd import MathShepherd
from pipeline.export.formats.openrlhf import OpenRlhf
from pipeline.export.formats.processbench import ProcessBench
from pipeline.export.formats.qwen_prm import QwenPrm
from pipeline.export.formats.trl import Trl

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
