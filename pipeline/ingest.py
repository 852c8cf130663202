"""Read the solutions to label: JSON Lines, JSON or Parquet from any fsspec URL, validated row by row.

Inputs are one or more files, folders (searched recursively for ``.jsonl``/``.ndjson``/``.json``/
``.parquet``, optionally ``.gz``/``.bz2``/``.xz``/``.zst`` compressed for the JSON kinds) or globs, on any
fsspec file system (local path, ``s3://``, ``gs://``, ``hf://``, ``memory://``). Files are read in sorted
order within each given path, rows in file order, so a run always sees the same sequence.

Each row has a problem, a gold answer and either a list of steps or one solution text that
:func:`pipeline.input.split.split_solution` cuts into steps; field names are configurable (:class:`InputSpec`),
and :data:`PRESETS` covers GSM8K- and MATH-shaped files. An optional id field names the solution; without
it the id is :func:`pipeline.labeling.types.content_key` of (problem, answer, steps), so the same content gets the
same id whatever file or format it comes from.

Validation never drops a row silently. A bad row becomes a :class:`Reject` (file, row, field, reason, raw
text); without ``skip_bad`` the whole input is checked first and :class:`InputError` names every bad row
(the first few in full) before anything is labeled; with ``skip_bad`` rejects go to a JSONL rejects file
and the rest proceeds. Row numbers: JSON Lines rows are named by 1-based ``line N`` (as in an editor);
Parquet rows and JSON-array items by 0-based ``row N``. ``Solution.source`` is ``"{file}:{row}"`` with the
0-based index.

Gold answers: with ``InputSpec.gold_check`` (``mcprm label`` sets it for the default sympy grader) the gold
answers of valid rows are read by the grader in batches, and a row whose gold it cannot read is rejected
like any other bad row (field: the answer field), before any rollout.

Duplicates: two rows with the same id and different content are an error naming both rows. Rows with the
same id *and* the same content (exact duplicates, e.g. the same solution listed twice) are not errors: the
first is kept, later copies are skipped, counted in :class:`IngestStats` ``duplicates`` and logged as a
warning. The id index costs about 150 bytes per solution (~150 MB for a million); everything else streams
(JSON Lines in 1 MiB chunks, Parquet by record batches of the needed columns only).
"""

from __future__ import annotations

import json
import logging
import math
import os
import uuid
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal

from graders.extract import last_box
from pipeline.input.split import SPLIT_MODES, SplitError, compile_split_regex, split_solution
from pipeline.labeling.types import Solution, content_key

logger = logging.getLogger(__name__)

FORMATS: tuple[str, ...] = ("jsonl", "json", "parquet")
ANSWER_EXTRACTORS: tuple[str, ...] = ("gsm8k", "boxed")
_EXTENSIONS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}
RAW_CHARS = 2000  # raw row text kept in a reject
MAX_LINE_BYTES = 64 << 20  # a JSON line longer than this is rejected without being held in memory
_CHUNK = 1 << 20
_BATCH_ROWS = 1024

# Field mappings for common data set shapes (override any field with keyword arguments).
PRESETS: dict[str, dict] = {
    # GSM8K: {"question", "answer": "reasoning lines\n#### 42"}; the reasoning lines are the steps.
    "gsm8k": dict(
        problem_field="question",
        answer_field="answer",
        answer_extract="gsm8k",
        solution_field="answer",
        splitter="newline",
    ),
    # Hendrycks MATH: {"problem", "solution" with a final \boxed{...}}. (MATH-500 also has "answer":
    # the defaults plus solution_field="solution" fit it without a preset.)
    "math": dict(answer_field="solution", answer_extract="boxed", solution_field="solution"),
}


class InputError(ValueError):
    """Input that cannot be labeled; the message names file, row and field and says what to do."""

    def __init__(self, message: str, rejects: Iterable[Reject] = ()):
        super().__init__(message)
        self.rejects: list[Reject] = list(rejects)


@dataclass(frozen=True)
class InputSpec:
    """Where the solutions are and how to read them (see the module docstring)."""

    paths: tuple[str, ...]
    problem_field: str = "problem"
    answer_field: str = "answer"
    steps_field: str = "steps"
    solution_field: str = "solution"
    id_field: str = "id"
    splitter: str = "blank-line"
    split_regex: str | None = None
    max_step_chars: int = 20000
    max_steps: int = 200
    format: str | None = None  # None: by extension; "jsonl" | "json" | "parquet" forces one for all files
    # How to get the gold answer from the answer field: None (as is), "gsm8k" (text after the last "####"),
    # "boxed" (content of the last \boxed{...}).
    answer_extract: str | None = None
    # Reads the gold answers of a batch of valid rows (e.g. a :class:`GoldCheck` around
    # ``graders.check_golds``): one reason per gold why the grader cannot read it, None when it can. A row
    # whose gold cannot be read is rejected (field: the answer field) before any rollout. None: no check.
    gold_check: Callable[[list[str]], list[str | None]] | None = field(default=None, compare=False)
    # Checks that a batch of valid solutions fits the model (e.g. :class:`pipeline.input.prompt_check.PromptCheck`:
    # prompt tokens + max_new_tokens within the context): one reason per solution, None when it fits. A row
    # that does not fit is rejected (field: the steps/solution field) before any rollout. None: no check.
    prompt_check: Callable[[list[Solution]], list[str | None]] | None = field(default=None, compare=False)

    def __post_init__(self):
        paths = (self.paths,) if isinstance(self.paths, str) else tuple(self.paths)
        object.__setattr__(self, "paths", paths)
        if not paths or not all(isinstance(p, str) and p for p in paths):
            raise InputError("no input given: pass one or more files, folders or globs")
        if self.splitter not in SPLIT_MODES:
            raise InputError(f"unknown splitter {self.splitter!r}; choose one of {', '.join(SPLIT_MODES)}")
        if self.splitter == "regex":
            if not self.split_regex:
                raise InputError("splitter 'regex' needs a split regex (--split-regex)")
            try:
                compile_split_regex(self.split_regex)
            except SplitError as e:
                raise InputError(str(e)) from None
        if self.format is not None and self.format not in FORMATS:
            raise InputError(f"unknown input format {self.format!r}; choose one of {', '.join(FORMATS)}")
        if self.answer_extract is not None and self.answer_extract not in ANSWER_EXTRACTORS:
            raise InputError(
                f"unknown answer_extract {self.answer_extract!r}; choose one of {', '.join(ANSWER_EXTRACTORS)}"
            )
        for name in ("max_step_chars", "max_steps"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise InputError(f"{name} must be a positive integer, got {getattr(self, name)!r}")

    @classmethod
    def preset(cls, name: str, paths, **overrides) -> InputSpec:
        """An InputSpec with the field mapping of :data:`PRESETS` ``[name]``, then ``overrides``."""
        if name not in PRESETS:
            raise InputError(f"unknown input preset {name!r}; choose one of {', '.join(PRESETS)}")
        return cls(paths=paths, **{**PRESETS[name], **overrides})


def _where(file: str, row: int | None, kind: str) -> str:
    if row is None:
        return file
    return f"{file} line {row + 1}" if kind == "jsonl" else f"{file} row {row}"


@dataclass(frozen=True)
class RawRow:
    """One input row as read: decoded ``data``, or ``error`` saying why it could not be decoded.

    ``row`` is the 0-based line (JSON Lines), row (Parquet) or item (JSON array) index; None for a problem
    with the whole file (unreadable, wrong Parquet schema). ``text`` is the line as read, when there is one.
    """

    file: str
    row: int | None
    data: object = None
    error: str | None = None
    field: str | None = None
    text: str | None = None
    kind: str = "jsonl"  # "jsonl" | "json" | "parquet": how rows are named in messages

    @property
    def where(self) -> str:
        return _where(self.file, self.row, self.kind)


@dataclass(frozen=True)
class Reject:
    """A row (or a whole file, ``row=None``) that cannot be labeled, and why."""

    file: str
    row: int | None
    field: str | None
    reason: str
    raw: str = ""
    kind: str = "jsonl"

    @property
    def where(self) -> str:
        return _where(self.file, self.row, self.kind)

    @property
    def message(self) -> str:
        return (
            f"{self.where}, field '{self.field}': {self.reason}"
            if self.field
            else f"{self.where}: {self.reason}"
        )

    def as_dict(self) -> dict:
        return {
            "file": self.file,
            "row": self.row,
            "where": self.where,
            "field": self.field,
            "reason": self.reason,
            "raw": self.raw,
        }


# ---------------------------------------------------------------------------------------------- files


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
    from fsspec.core import url_to_fs
    from fsspec.implementations.local import LocalFileSystem

    out: list[str] = []
    seen: set[tuple[str, str]] = set()
    exts = ", ".join(list(_EXTENSIONS) + [f"{e}{c}" for e in (".jsonl", ".json") for c in (".gz", ".zst")])

    def wanted(p: str, root: str = "") -> bool:
        rel = p[len(root) :] if root and p.startswith(root) else p.rsplit("/", 1)[-1]
        hidden = any(part.startswith((".", "_")) for part in rel.split("/") if part)
        return not hidden and file_format(p, spec.format)[0] is not None

    for pattern in spec.paths:
        try:
            fs, path = url_to_fs(pattern)
        except (ValueError, ImportError) as e:
            raise InputError(f"cannot open input {pattern!r}: {e}") from None
        try:
            files = _list_input(fs, path, pattern, spec, wanted)
        except InputError:
            raise
        except Exception as e:
            from pipeline.storage.store import describe_storage_failure, is_storage_failure

            if not is_storage_failure(e):
                raise
            raise InputError(f"cannot read the input {pattern}: {describe_storage_failure(e)}") from e
        if not files:
            raise InputError(
                f"{pattern}: matched no input files (looked for {exts}); check the path or pass --input-format jsonl|json|parquet"
            )
        local = isinstance(fs, LocalFileSystem)
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


# ---------------------------------------------------------------------------------------------- reading


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


def _read_jsonl(file: str, f, kind: str = "jsonl") -> Iterator[RawRow]:
    i = -1
    for i, (line, nbytes) in enumerate(_iter_lines(f, MAX_LINE_BYTES)):
        if line is None:
            yield RawRow(
                file,
                i,
                error=f"line is {nbytes} bytes, over the {MAX_LINE_BYTES}-byte limit for one row",
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
            + f" (columns: {', '.join(names)}); map the field (e.g. --{_flag(spec, missing[0])}-field NAME) "
            f"or fix the file; none of its {pf.metadata.num_rows} rows was read",
        )
        return
    wanted = [spec.problem_field, spec.answer_field, spec.steps_field, spec.solution_field, spec.id_field]
    columns = [c for c in dict.fromkeys(wanted) if c in names]
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=_BATCH_ROWS, columns=columns, use_threads=False):
            for data in batch.to_pylist():
                yield RawRow(file, row, data=data, kind="parquet")
                row += 1
    except (pa.ArrowException, OSError) as e:
        yield RawRow(file, row, kind="parquet", error=f"cannot read the file from this row on ({e})")


def _flag(spec: InputSpec, name: str) -> str:
    for attr in ("problem", "answer", "steps", "solution", "id"):
        if getattr(spec, f"{attr}_field") == name:
            return attr
    return "steps"


def _read_file(url: str, spec: InputSpec) -> Iterator[RawRow]:
    from fsspec.core import url_to_fs

    fmt, compression = file_format(url, spec.format)
    fs, path = url_to_fs(url)
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
            yield from _read_jsonl(url, f, kind="jsonl")
    except (OSError, EOFError, ValueError) as e:  # unreadable or corrupt (e.g. truncated .gz) file
        yield RawRow(url, None, kind=kind, error=f"cannot read the file ({type(e).__name__}: {e})")
    except Exception as e:  # the storage itself (credentials, a missing bucket): a problem of the input, named
        from pipeline.storage.store import describe_storage_failure, is_storage_failure

        if not is_storage_failure(e):
            raise
        raise InputError(f"cannot read the input {url}: {describe_storage_failure(e)}") from e


def iter_rows(spec: InputSpec, files: list[str] | None = None) -> Iterator[RawRow]:
    """Every row of every input file, in order, decoded but not validated."""
    for url in resolve_files(spec) if files is None else files:
        yield from _read_file(url, spec)


# ---------------------------------------------------------------------------------------------- validation


def _bad_text(s: str) -> str | None:
    """Why ``s`` cannot be stored as UTF-8 (lone surrogates from JSON escapes), or None."""
    if s.isascii():
        return None
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"holds an invalid character (lone surrogate {s[e.start]!r} at {e.start}), not UTF-8 text"
    return None


def _number_text(x) -> str | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if not math.isfinite(x):
            return None
        return str(int(x)) if x.is_integer() and abs(x) < 1e16 else repr(x)
    if isinstance(x, Decimal):
        return str(x) if x.is_finite() else None
    return None


def _raw_text(raw: RawRow) -> str:
    if raw.text is not None:
        return raw.text[:RAW_CHARS]
    if raw.data is None:
        return ""
    try:
        return json.dumps(raw.data, ensure_ascii=False, default=str)[:RAW_CHARS]
    except (TypeError, ValueError):
        return repr(raw.data)[:RAW_CHARS]


def _type_name(x) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "a boolean", type(None): "null"}.get(
        type(x), type(x).__name__
    )


def validate(raw: RawRow, spec: InputSpec) -> Solution | Reject:
    """Turn one :class:`RawRow` into a :class:`Solution`, or a :class:`Reject` saying what is wrong."""

    def reject(field: str | None, reason: str) -> Reject:
        return Reject(raw.file, raw.row, field, reason, _raw_text(raw), raw.kind)

    if raw.error is not None:
        return reject(raw.field, raw.error)
    data = raw.data
    if not isinstance(data, dict):
        return reject(None, f"the row is {_type_name(data)}, expected an object with fields")

    def missing(name: str, what: str) -> Reject:
        have = ", ".join(list(data)[:12]) or "none"
        return reject(
            name,
            f"missing {what} (the row has fields: {have}); map the field with "
            f"--{_flag(spec, name)}-field if it has another name",
        )

    # problem
    pf = spec.problem_field
    if pf not in data:
        return missing(pf, "problem")
    problem = data[pf]
    if problem is None:
        return reject(pf, "problem is null")
    if not isinstance(problem, str):
        return reject(pf, f"expected the problem as text, got {_type_name(problem)}")
    problem = problem.strip()
    if not problem:
        return reject(pf, "problem is empty")
    if why := _bad_text(problem):
        return reject(pf, f"problem {why}")

    # gold answer
    af = spec.answer_field
    if af not in data:
        return missing(af, "gold answer")
    answer = data[af]
    if answer is None:
        return reject(af, "missing gold answer (null)")
    if not isinstance(answer, str):
        num = _number_text(answer)
        if num is None:
            return reject(af, f"expected the gold answer as text or a number, got {_type_name(answer)}")
        answer = num
    if spec.answer_extract == "gsm8k":
        k = answer.rfind("####")
        if k < 0:
            return reject(af, "no '#### <answer>' marker in the answer (answer_extract='gsm8k')")
        answer = answer[k + 4 :]
    elif spec.answer_extract == "boxed":
        boxed = last_box(answer)
        if boxed is None:
            return reject(af, "no \\boxed{...} in the answer (answer_extract='boxed')")
        answer = boxed
    answer = answer.strip()
    if not answer:
        return reject(af, "gold answer is empty")
    if why := _bad_text(answer):
        return reject(af, f"gold answer {why}")

    # steps
    sf, tf = spec.steps_field, spec.solution_field
    steps_value = data.get(sf)
    if steps_value is not None:
        if isinstance(steps_value, str):
            return reject(
                sf,
                "expected a list of step strings, got one text; if this field holds the whole "
                f"solution, map it with --solution-field {sf} and choose a --splitter",
            )
        if not isinstance(steps_value, list | tuple):
            return reject(sf, f"expected a list of step strings, got {_type_name(steps_value)}")
        if not steps_value:
            return reject(sf, "empty steps list")
        steps = []
        for i, s in enumerate(steps_value):
            if not isinstance(s, str):
                return reject(sf, f"steps[{i}] is {_type_name(s)}, expected text")
            s = s.strip()
            if not s:
                return reject(sf, f"steps[{i}] is empty")
            steps.append(s)
        where_field = sf
    else:
        text = data.get(tf)
        if text is None:
            if sf in data or tf in data:
                return reject(
                    sf, f"both '{sf}' and '{tf}' are null; need the steps (list) or the solution text"
                )
            have = ", ".join(list(data)[:12]) or "none"
            return reject(
                sf,
                f"missing steps: need '{sf}' (list of strings) or '{tf}' (text) (the row has "
                "fields: " + have + "); map them with --steps-field / --solution-field",
            )
        if not isinstance(text, str):
            return reject(tf, f"expected the solution as text, got {_type_name(text)}")
        try:
            steps = split_solution(text, spec.splitter, spec.split_regex)
        except SplitError as e:
            return reject(tf, str(e))
        if not steps:
            return reject(tf, "the solution is empty (no steps after splitting)")
        where_field = tf
    if len(steps) > spec.max_steps:
        return reject(where_field, f"{len(steps)} steps, over the limit of {spec.max_steps} (--max-steps)")
    for i, s in enumerate(steps):
        if len(s) > spec.max_step_chars:
            return reject(
                where_field,
                f"step {i} has {len(s)} characters, over the limit of "
                f"{spec.max_step_chars} (--max-step-chars)",
            )
        if why := _bad_text(s):
            return reject(where_field, f"step {i} {why}")

    # id
    idf = spec.id_field
    sid = data.get(idf)
    if sid is None:
        sid = content_key(problem, answer, steps)
    elif isinstance(sid, str):
        sid = sid.strip()
        if not sid:
            return reject(idf, "id is empty; remove it to derive one from the content")
        if why := _bad_text(sid):
            return reject(idf, f"id {why}")
    elif isinstance(sid, int) and not isinstance(sid, bool):
        sid = str(sid)
    else:
        return reject(idf, f"expected the id as text or an integer, got {_type_name(sid)}")
    return Solution(
        id=sid, problem=problem, answer=answer, steps=tuple(steps), source=f"{raw.file}:{raw.row}"
    )


# ---------------------------------------------------------------------------------------------- streams


@dataclass
class IngestStats:
    """What a pass over the input saw."""

    files: int = 0
    rows: int = 0  # rows read (blank JSONL lines are not rows)
    solutions: int = 0  # valid, unique solutions
    rejected: int = 0  # rows (or whole files) rejected
    duplicates: int = 0  # exact duplicates skipped (same id and content as an earlier row)
    first_duplicate: str = ""  # "X duplicates Y" for the first one, for messages


class _IdIndex:
    """id -> (content hash, where) of every accepted solution, compact (~150 bytes per id)."""

    def __init__(self):
        self._ids: dict[str, int] = {}
        self._keys = array("Q")
        self._files = array("I")
        self._rows = array("q")
        self._file_names: list[tuple[str, str]] = []
        self._file_index: dict[str, int] = {}

    def check(self, sol: Solution, raw: RawRow, key_hex: str) -> str | None:
        """None if new (and record it), "dup:<where>" for an exact duplicate, else the earlier row's place."""
        key = int(key_hex, 16)
        j = self._ids.get(sol.id)
        if j is not None:
            file, kind = self._file_names[self._files[j]]
            return ("dup:" if self._keys[j] == key else "") + _where(file, self._rows[j], kind)
        fi = self._file_index.get(raw.file)
        if fi is None:
            fi = self._file_index[raw.file] = len(self._file_names)
            self._file_names.append((raw.file, raw.kind))
        self._ids[sol.id] = len(self._keys)
        self._keys.append(key)
        self._files.append(fi)
        self._rows.append(raw.row)
        return None


class GoldCheck:
    """A batch gold-answer check (``check(golds) -> [reason or None]``) with a bounded memo of its answers.

    A run validates its input more than once (check, scan, shard pass) and many solutions share a problem's
    gold answer: each distinct gold is read once.
    """

    def __init__(self, check: Callable[[list[str]], list[str | None]], max_cached: int = 1 << 17):
        self.check = check
        self.max_cached = max_cached
        self._memo: dict[str, str | None] = {}

    def __call__(self, golds: list[str]) -> list[str | None]:
        todo = list(dict.fromkeys(g for g in golds if g not in self._memo))
        if todo:
            reasons = self.check(todo)
            if len(reasons) != len(todo):
                raise RuntimeError(f"gold check returned {len(reasons)} results for {len(todo)} gold answers")
            if len(self._memo) + len(todo) > self.max_cached:
                self._memo.clear()
            got = dict(zip(todo, reasons))
            self._memo.update(got)
        else:
            got = {}
        return [got[g] if g in got else self._memo[g] for g in golds]


def _gold_checked(spec: InputSpec, rows: Iterator[tuple[RawRow, Solution | Reject]]
                  ) -> Iterator[tuple[RawRow, Solution | Reject]]:
    """Reject the rows whose gold answer ``spec.gold_check`` cannot read, checking golds in batches."""
    if spec.gold_check is None:
        yield from rows
        return
    pending: list[tuple[RawRow, Solution | Reject]] = []
    n_sol = 0

    def flush() -> Iterator[tuple[RawRow, Solution | Reject]]:
        sols = [out for _, out in pending if isinstance(out, Solution)]
        reasons = iter(spec.gold_check([s.answer for s in sols]) if sols else [])
        for raw, out in pending:
            if isinstance(out, Solution) and (why := next(reasons)) is not None:
                out = Reject(raw.file, raw.row, spec.answer_field,
                             f"gold answer cannot be read by the grader: {why}", _raw_text(raw), raw.kind)
            yield raw, out

    for raw, out in rows:
        pending.append((raw, out))
        n_sol += isinstance(out, Solution)
        if n_sol >= _BATCH_ROWS:
            yield from flush()
            pending, n_sol = [], 0
    if pending:
        yield from flush()


def _prompt_checked(spec: InputSpec, rows: Iterator[tuple[RawRow, Solution | Reject]]
                    ) -> Iterator[tuple[RawRow, Solution | Reject]]:
    """Reject the rows whose prompt ``spec.prompt_check`` says cannot fit the model, in batches."""
    if spec.prompt_check is None:
        yield from rows
        return
    pending: list[tuple[RawRow, Solution | Reject]] = []

    def flush() -> Iterator[tuple[RawRow, Solution | Reject]]:
        sols = [out for _, out in pending if isinstance(out, Solution)]
        reasons = iter(spec.prompt_check(sols) if sols else [])
        for raw, out in pending:
            if isinstance(out, Solution) and (why := next(reasons)) is not None:
                fld = spec.steps_field if isinstance(raw.data, dict) and spec.steps_field in raw.data \
                    else spec.solution_field
                out = Reject(raw.file, raw.row, fld, why, _raw_text(raw), raw.kind)
            yield raw, out

    for item in rows:
        pending.append(item)
        if len(pending) >= _BATCH_ROWS:
            yield from flush()
            pending = []
    if pending:
        yield from flush()


def _validated(
    spec: InputSpec, stats: IngestStats, files: list[str] | None = None
) -> Iterator[Solution | Reject]:
    files = resolve_files(spec) if files is None else files
    stats.files = len(files)
    index = _IdIndex()

    def checked_rows() -> Iterator[tuple[RawRow, Solution | Reject]]:
        for raw in iter_rows(spec, files):
            if raw.row is not None:
                stats.rows += 1
            yield raw, validate(raw, spec)

    for raw, out in _prompt_checked(spec, _gold_checked(spec, checked_rows())):
        if isinstance(out, Solution):  # ids must be unique; exact duplicates are skipped (module doc)
            derived = raw.data.get(spec.id_field) is None  # then the id already is the content key
            prev = index.check(out, raw, out.id if derived else out.key)
            if prev is not None:
                if prev.startswith("dup:"):
                    stats.duplicates += 1
                    if not stats.first_duplicate:
                        stats.first_duplicate = f"{raw.where} duplicates {prev[4:]}"
                    continue
                out = Reject(
                    raw.file,
                    raw.row,
                    spec.id_field,
                    f"id {out.id!r} is already used by {prev} for different content; ids must be unique",
                    _raw_text(raw),
                    raw.kind,
                )
        if isinstance(out, Solution):
            stats.solutions += 1
        else:
            stats.rejected += 1
        yield out
    if stats.duplicates:
        logger.warning(
            "skipped %d exact duplicate row(s) (same id and content as an earlier row; first: %s)",
            stats.duplicates,
            stats.first_duplicate,
        )


def _error_message(shown: list[Reject], total: int) -> str:
    lines = [r.message for r in shown]
    more = f" ({total} bad rows in all, first {len(shown)} shown)" if total > len(shown) else ""
    fix = "Fix the row" if total == 1 else "Fix the rows"
    it = "it" if total == 1 else "them"
    lines.append(
        f"{fix} or pass --skip-bad to write {it} to the rejects file with the reason and label the "
        f"rest.{more}"
    )
    return "\n".join(lines)


def check_inputs(spec: InputSpec, max_shown: int = 5) -> IngestStats:
    """Validate the whole input without keeping it; raise :class:`InputError` listing the bad rows."""
    stats = IngestStats()
    shown: list[Reject] = []
    for item in _validated(spec, stats):
        if isinstance(item, Reject) and len(shown) < max_shown:
            shown.append(item)
    if stats.rejected:
        raise InputError(_error_message(shown, stats.rejected), shown)
    return stats


def iter_solutions(
    spec: InputSpec,
    skip_bad: bool = False,
    on_reject: Callable[[Reject], None] | None = None,
    stats: IngestStats | None = None,
) -> Iterator[Solution]:
    """Stream valid solutions in input order with bounded memory (for inputs too big for a list).

    Without ``skip_bad`` the whole input is validated first, when this function is called (not lazily),
    and :class:`InputError` is raised before any solution is yielded. With ``skip_bad`` every reject is
    passed to ``on_reject`` (required; e.g. a :class:`RejectsWriter`). ``stats`` is filled as rows stream.
    """
    if skip_bad and on_reject is None:
        raise ValueError("skip_bad needs on_reject (e.g. a RejectsWriter) so that no row is dropped silently")
    if not skip_bad:
        check_inputs(spec)
    stats = stats if stats is not None else IngestStats()

    def gen() -> Iterator[Solution]:
        for item in _validated(spec, stats):
            if isinstance(item, Reject):
                if not skip_bad:  # the input changed since the check
                    raise InputError(_error_message([item], 1), [item])
                on_reject(item)
            else:
                yield item

    return gen()


class RejectsWriter:
    """Writes rejects as JSON Lines (file, row, where, field, reason, raw) to an fsspec URL.

    Local files are written under a temporary name and renamed on close; object stores publish the file
    when it is closed. Use as a context manager and as the ``on_reject`` callback.
    """

    def __init__(self, path: str):
        from fsspec.core import url_to_fs
        from fsspec.implementations.local import LocalFileSystem

        self.path = path
        self.count = 0
        self._fs, self._target = url_to_fs(path)
        self._local = isinstance(self._fs, LocalFileSystem)
        parent = self._fs._parent(self._target)
        if parent:
            self._fs.makedirs(parent, exist_ok=True)
        self._tmp = (
            f"{self._target}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}" if self._local else self._target
        )
        self._f = self._fs.open(self._tmp, "wb")

    def __call__(self, reject: Reject) -> None:
        self.write(reject)

    def write(self, reject: Reject) -> None:
        self._f.write(json.dumps(reject.as_dict(), ensure_ascii=False).encode("utf-8") + b"\n")
        self.count += 1

    def close(self, publish: bool = True) -> None:
        if self._f is None:
            return
        self._f.close()
        self._f = None
        if self._local:
            if publish:
                os.replace(self._tmp, self._target)
            else:
                os.remove(self._tmp)

    def __enter__(self) -> RejectsWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(publish=exc_type is None)


@dataclass
class LoadResult:
    solutions: list[Solution]
    stats: IngestStats
    rejects_path: str | None = None
    files: list[str] = field(default_factory=list)

    @property
    def n_rejected(self) -> int:
        return self.stats.rejected

    @property
    def n_duplicates(self) -> int:
        return self.stats.duplicates


def load_solutions(spec: InputSpec, skip_bad: bool = False, rejects_path: str | None = None) -> LoadResult:
    """Read and validate the whole input into a list (one pass). For huge inputs use :func:`iter_solutions`.

    Without ``skip_bad`` any bad row raises :class:`InputError` (naming up to 5 rows and the total). With
    ``skip_bad`` rejects are written to ``rejects_path`` (required; written, possibly empty, even when there
    are none, so that a rerun never leaves a stale file).
    """
    if skip_bad and not rejects_path:
        raise ValueError("skip_bad needs rejects_path so that no row is dropped silently")
    stats = IngestStats()
    solutions: list[Solution] = []
    shown: list[Reject] = []
    files = resolve_files(spec)
    writer = RejectsWriter(rejects_path) if skip_bad else None
    try:
        for item in _validated(spec, stats, files):
            if isinstance(item, Solution):
                solutions.append(item)
            elif writer is not None:
                writer.write(item)
            elif len(shown) < 5:
                shown.append(item)
    except BaseException:
        if writer is not None:
            writer.close(publish=False)
        raise
    if writer is not None:
        writer.close()
    if stats.rejected and not skip_bad:
        raise InputError(_error_message(shown, stats.rejected), shown)
    return LoadResult(solutions, stats, rejects_path if skip_bad else None, files)
