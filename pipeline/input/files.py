"""Input files: paths, folders and globs resolved on any fsspec file system, and one decoder per format
(JSON Lines, JSON array, Parquet) that turns bytes into :class:`~pipeline.input.spec.RawRow` s."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

from pipeline.input.spec import MAX_LINE_BYTES, InputError, InputSpec, RawRow, flag_name

_EXTENSIONS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}
_CHUNK = 1 << 20
BATCH_ROWS = 1024  # rows per Parquet record batch and per gold/prompt check


def _has_magic(path: str) -> bool:
    return any(c in path for c in "*?[")


def file_format(path: str, forced: str | None = None) -> tuple[str | None, str | None]:
    """(format, compression) of ``path`` from its extension (format None if unknown)."""
    name = path.rsplit("/", 1)[-1].lower()
    compression = None
    for ext, comp in _COMPRESSIONS.items():
        if name.endswith(ext):
            compression, name = comp, name[: -len(ext)]
            break
    fmt = forced or next((f for ext, f in _EXTENSIONS.items() if name.endswith(ext)), None)
    if fmt == "parquet" and compression is not None:
        fmt = None  # Parquet compresses inside the file
    return fmt, compression


def resolve_files(spec: InputSpec) -> list[str]:
    """Expand ``spec.paths`` (files, folders, globs) into a list of file URLs.

    Folders are searched recursively for supported extensions (hidden and ``_``-prefixed names skipped;
    with ``spec.format`` set, every file). Sorted within each given path; a file named twice is read once.
    Raises :class:`InputError` naming the path when it does not exist or matches no input file.
    """
    from pipeline.storage.fs import filesystem, is_local

    out: list[str] = []
    seen: set[tuple[str, str]] = set()
    exts = ", ".join(list(_EXTENSIONS) + [f"{e}{c}" for e in (".jsonl", ".json") for c in (".gz", ".zst")])

    def wanted(p: str, root: str = "") -> bool:
        rel = p[len(root) :] if root and p.startswith(root) else p.rsplit("/", 1)[-1]
        hidden = any(part.startswith((".", "_")) for part in rel.split("/") if part)
        return not hidden and file_format(p, spec.format)[0] is not None

    for pattern in spec.paths:
        try:
            fs, path = filesystem(pattern)
        except (ValueError, ImportError) as e:
            raise InputError(f"cannot open input {pattern!r}: {e}") from None
        try:
            files = _list_input(fs, path, pattern, spec, wanted)
        except InputError:
            raise
        except Exception as e:
            from pipeline.storage.failures import describe_storage_failure, is_storage_failure

            if not is_storage_failure(e):
                raise
            raise InputError(f"cannot read the input {pattern}: {describe_storage_failure(e)}") from e
        if not files:
            raise InputError(
                f"{pattern}: matched no input files (looked for {exts}); check the path or pass --input-format jsonl|json|parquet"
            )
        local = is_local(fs)
        for f in files:
            ident = (str(fs.protocol), f)
            if ident in seen:
                continue
            seen.add(ident)
            if not local:
                out.append(fs.unstrip_protocol(f))
            elif f == path and not _has_magic(path):
                out.append(pattern)  # keep the user's spelling of a single file
            elif os.path.isabs(pattern) or pattern.startswith("file:"):
                out.append(f)
            else:
                out.append(os.path.relpath(f))
    return out


def _list_input(fs, path: str, pattern: str, spec: InputSpec, wanted) -> list[str]:
    """The input files ``path`` (a file, folder or glob) names; storage failures propagate as they are."""
    if _has_magic(path):
        files = []
        for m in sorted(fs.glob(path)):
            if fs.isdir(m):
                files.extend(sorted(p for p in fs.find(m) if wanted(p, m)))
            elif wanted(m):
                files.append(m)
    elif fs.isdir(path):
        files = sorted(p for p in fs.find(path) if wanted(p, path))
    elif fs.exists(path):
        if file_format(path, spec.format)[0] is None:
            raise InputError(
                f"{pattern}: cannot tell the format from the file name; use .jsonl, .json or .parquet "
                "(optionally .gz for JSON) or pass the format (--input-format jsonl|json|parquet)"
            )
        files = [path]
    else:
        raise InputError(f"input {pattern}: no such file or folder")
    return files


# ---------------------------------------------------------------------------------------------- decoders


def _iter_lines(f, max_bytes: int) -> Iterator[tuple[bytes | None, int]]:
    """(line without its newline, or None when longer than ``max_bytes``; its length) per line.

    Reads ``_CHUNK`` bytes at a time; an over-long line is counted, not kept.
    """
    parts: list[bytes] = []  # pieces of the current line (empty while skipping)
    size = 0  # bytes of the current line so far
    while chunk := f.read(_CHUNK):
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0:
            size += nl - start
            if size > max_bytes:
                yield None, size
            else:
                parts.append(chunk[start:nl])
                yield (parts[0] if len(parts) == 1 else b"".join(parts)), size
            parts, size, start = [], 0, nl + 1
        size += len(chunk) - start
        if size > max_bytes:
            parts = []
        else:
            parts.append(chunk[start:])
    if size > max_bytes:
        yield None, size
    elif size:
        yield b"".join(parts), size


def _read_jsonl(file: str, f, kind: str = "jsonl", max_bytes: int | None = None) -> Iterator[RawRow]:
    """``max_bytes``: the longest line decoded (default :data:`MAX_LINE_BYTES`; a run passes
    :meth:`InputSpec.max_line_bytes`, what its row limits allow); a longer one is counted as it streams in and
    rejected without being held in memory."""
    limit = min(MAX_LINE_BYTES, max_bytes or MAX_LINE_BYTES)
    i = -1
    for i, (line, nbytes) in enumerate(_iter_lines(f, limit)):
        if line is None:
            yield RawRow(
                file,
                i,
                error=f"line is {nbytes} bytes, over the {limit}-byte limit for one row (what --max-steps, "
                      "--max-step-chars and the problem's limit allow)",
                kind=kind,
            )
            continue
        if i == 0 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            bad = line[e.start : e.start + 4].hex(" ")
            yield RawRow(
                file,
                i,
                text=line.decode("utf-8", "backslashreplace"),
                kind=kind,
                error=f"not UTF-8: invalid byte at offset {e.start} of the line (0x{bad}); re-encode the file as UTF-8",
            )
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            end = text.rstrip()[-1:]
            hint = "the line looks truncated" if end not in ("}", "]") else "malformed JSON"
            yield RawRow(
                file, i, text=text, kind=kind, error=f"not valid JSON ({e.msg}, column {e.colno}); {hint}"
            )
            continue
        yield RawRow(file, i, data=data, text=text, kind=kind)


def _read_json_array(file: str, f) -> Iterator[RawRow]:
    blob = f.read()
    if blob.startswith(b"\xef\xbb\xbf"):
        blob = blob[3:]
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as e:
        yield RawRow(
            file,
            None,
            kind="json",
            error=f"not UTF-8: invalid byte at offset {e.start} of the file; re-encode the file as UTF-8",
        )
        return
    del blob
    try:
        items = json.loads(text)
    except json.JSONDecodeError as e:
        yield RawRow(
            file, None, kind="json", error=f"not valid JSON ({e.msg}, line {e.lineno} column {e.colno})"
        )
        return
    if not isinstance(items, list):
        yield RawRow(
            file, None, kind="json", error="a JSON file must hold an array of rows (or use JSON Lines)"
        )
        return
    for i, item in enumerate(items):
        yield RawRow(file, i, data=item, kind="json")


def _required_columns(spec: InputSpec, names: list[str]) -> list[str]:
    missing = [c for c in (spec.problem_field, spec.answer_field) if c not in names]
    if spec.steps_field not in names and spec.solution_field not in names:
        missing.append(f"{spec.steps_field}' or '{spec.solution_field}")
    return missing


def _read_parquet(file: str, f, spec: InputSpec) -> Iterator[RawRow]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(f)
    except (pa.ArrowException, OSError) as e:
        yield RawRow(file, None, kind="parquet", error=f"not a readable Parquet file ({e})")
        return
    names = pf.schema_arrow.names
    missing = _required_columns(spec, names)
    if missing:
        yield RawRow(
            file,
            None,
            kind="parquet",
            field=missing[0],
            error="Parquet schema has no column "
            + " and no column ".join(f"'{m}'" for m in missing)
            + f" (columns: {', '.join(names)}); map the field (e.g. --{flag_name(spec, missing[0])}-field NAME) "
            f"or fix the file; none of its {pf.metadata.num_rows} rows was read",
        )
        return
    wanted = [spec.problem_field, spec.answer_field, spec.steps_field, spec.solution_field, spec.id_field]
    columns = [c for c in dict.fromkeys(wanted) if c in names]
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=columns, use_threads=False):
            for data in batch.to_pylist():
                yield RawRow(file, row, data=data, kind="parquet")
                row += 1
    except (pa.ArrowException, OSError) as e:
        yield RawRow(file, row, kind="parquet", error=f"cannot read the file from this row on ({e})")


def _read_file(url: str, spec: InputSpec) -> Iterator[RawRow]:
    from pipeline.storage.fs import filesystem

    fmt, compression = file_format(url, spec.format)
    fs, path = filesystem(url)
    kind = fmt or "jsonl"
    try:
        with fs.open(path, "rb", compression=compression) as f:
            if fmt == "parquet":
                yield from _read_parquet(url, f, spec)
                return
            if fmt == "json":
                head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
                f.seek(0)
                if head.startswith(b"["):
                    yield from _read_json_array(url, f)
                    return
            yield from _read_jsonl(url, f, kind="jsonl", max_bytes=spec.max_line_bytes())
    except (OSError, EOFError, ValueError) as e:  # unreadable or corrupt (e.g. truncated .gz) file
        yield RawRow(url, None, kind=kind, error=f"cannot read the file ({type(e).__name__}: {e})")
    except Exception as e:  # the storage itself (credentials, a missing bucket): a problem of the input, named
        from pipeline.storage.failures import describe_storage_failure, is_storage_failure

        if not is_storage_failure(e):
            raise
        raise InputError(f"cannot read the input {url}: {describe_storage_failure(e)}") from e


def iter_rows(spec: InputSpec, files: list[str] | None = None) -> Iterator[RawRow]:
    """Every row of every input file, in order, decoded but not validated."""
    for url in resolve_files(spec) if files is None else files:
        yield from _read_file(url, spec)


def iter_objects(spec: InputSpec, bad: list[str]) -> Iterator[tuple[RawRow, dict]]:
    """The rows of ``spec`` that are JSON objects, as ``(row, its dict)``; every other row (unreadable, not an
    object) is appended to ``bad`` as ``"where: what is wrong"`` (the commands that read loose rows: generate,
    score)."""
    for raw in iter_rows(spec):
        if raw.error:
            bad.append(f"{raw.where}: {raw.error}")
        elif not isinstance(raw.data, dict):
            bad.append(f"{raw.where}: a row must be a JSON object")
        else:
            yield raw, raw.data
