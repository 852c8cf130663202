"""Reading an export folder back, for the tests (trainers read it with ``datasets``)."""

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
