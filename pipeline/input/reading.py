"""The input as a stream of valid solutions: rows decoded, validated, gold answers and prompt lengths checked
in batches, ids checked for uniqueness; rejects raised together or written to a rejects file."""

from __future__ import annotations

import json
import logging
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pipeline.input import files
from pipeline.input.files import iter_rows, resolve_files
from pipeline.input.spec import InputError, InputSpec, RawRow, Reject, _where
from pipeline.input.validation import _raw_text, validate
from pipeline.labeling.types import Solution
from pipeline.storage.atomic import AtomicFile

logger = logging.getLogger(__name__)


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


Checked = Iterator[tuple[RawRow, Solution | Reject]]  # rows as read, each valid (Solution) or not (Reject)


def _batch_checked(rows: Checked, check: Callable[[list[Solution]], list[str | None]],
                   reject: Callable[[RawRow, str], Reject]) -> Checked:
    """Run a batch check over the valid rows (``check(solutions) -> [reason or None]``, BATCH_ROWS at a time)
    and turn each valid row with a reason into ``reject(raw, reason)``; rows keep their order."""
    pending: list[tuple[RawRow, Solution | Reject]] = []
    n_sol = 0

    def flush() -> Checked:
        sols = [out for _, out in pending if isinstance(out, Solution)]
        reasons = iter(check(sols) if sols else [])
        for raw, out in pending:
            if isinstance(out, Solution) and (why := next(reasons)) is not None:
                out = reject(raw, why)
            yield raw, out

    for raw, out in rows:
        pending.append((raw, out))
        n_sol += isinstance(out, Solution)
        if n_sol >= files.BATCH_ROWS or len(pending) >= files.BATCH_ROWS:
            yield from flush()
            pending, n_sol = [], 0
    if pending:
        yield from flush()


def _gold_checked(spec: InputSpec, rows: Checked) -> Checked:
    """Reject the rows whose gold answer ``spec.gold_check`` cannot read, checking golds in batches."""
    if spec.gold_check is None:
        return rows
    gold_check = spec.gold_check
    return _batch_checked(rows, lambda sols: gold_check([s.answer for s in sols]), lambda raw, why: Reject(
        raw.file, raw.row, spec.answer_field, f"gold answer cannot be read by the grader: {why}", _raw_text(raw),
        raw.kind))


def _prompt_checked(spec: InputSpec, rows: Checked) -> Checked:
    """Reject the rows whose prompt ``spec.prompt_check`` says cannot fit the model, in batches."""
    if spec.prompt_check is None:
        return rows

    def reject(raw: RawRow, why: str) -> Reject:
        fld = spec.steps_field if isinstance(raw.data, dict) and spec.steps_field in raw.data else spec.solution_field
        return Reject(raw.file, raw.row, fld, why, _raw_text(raw), raw.kind)

    return _batch_checked(rows, spec.prompt_check, reject)


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
        if self._local:
            self._f = AtomicFile(self._target)
        else:
            parent = self._fs._parent(self._target)
            if parent:
                self._fs.makedirs(parent, exist_ok=True)
            self._f = self._fs.open(self._target, "wb")

    def __call__(self, reject: Reject) -> None:
        self.write(reject)

    def write(self, reject: Reject) -> None:
        self._f.write(json.dumps(reject.as_dict(), ensure_ascii=False).encode("utf-8") + b"\n")
        self.count += 1

    def close(self, publish: bool = True) -> None:
        if self._f is None:
            return
        f, self._f = self._f, None
        if not self._local:
            f.close()
        elif publish:
            f.publish()
        else:
            f.discard()

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
