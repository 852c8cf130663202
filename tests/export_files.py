"""For the export tests: an export folder read back (trainers read it with ``datasets``), and one record's
format, parse, schema and checks through the format's exporter (``get_exporter(fmt)``, as the export run calls
them), by the row's options."""

from __future__ import annotations

import json
import posixpath


def load_export(output_url: str) -> list[dict]:
    """All records of an export folder, in order."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(output_url)
    names = sorted(p for p in fs.ls(root, detail=False) if posixpath.basename(p).startswith("part-"))
    out: list[dict] = []
    for p in names:
        with fs.open(p, "rb") as f:
            if p.endswith(".parquet"):
                import pyarrow.parquet as pq

                out.extend(pq.read_table(f, use_threads=False).to_pylist())
            else:
                out.extend(json.loads(line) for line in f.read().decode().splitlines() if line.strip())
    return out


def format_row(row, opts, tokenizer=None) -> dict:
    """The trainer-facing record of one row."""
    from pipeline.export.formats import get_exporter

    return get_exporter(opts.fmt).record(row, opts, tokenizer)


def parse_record(record: dict, problem: str, opts, tokenizer=None):
    """Steps and labels read back out of a record (``processbench``: ``[True] * label + [False]``)."""
    from pipeline.export.formats import get_exporter

    return get_exporter(opts.fmt).parse(record, problem, opts, tokenizer)


def check_row(record: dict, row, opts, tokenizer=None) -> None:
    """The check every exported record passes before anything is written (ExportError naming the row)."""
    from pipeline.export.formats import get_exporter

    get_exporter(opts.fmt).check(record, row, opts, tokenizer)


def record_schema(fmt: str, soft: bool):
    from pipeline.export.formats import get_exporter

    return get_exporter(fmt).schema(soft)


def tag_of(opts) -> str:
    from pipeline.export.formats import get_exporter

    return get_exporter(opts.fmt).tag(opts)
