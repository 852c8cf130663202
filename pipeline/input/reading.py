"""The input as one stream of valid solutions, each content once: rows decoded, validated, gold answers and
prompt lengths checked in batches, ids checked for uniqueness and contents de-duplicated with compact indexes
(about 52 bytes a solution and its id), in one pass; rejects raised together at the end or passed on one by
one."""

from __future__ import annotations

import json
import logging
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pipeline.input import files
from pipeline.input.files import iter_rows, resolve_files
from pipeline.input.spec import InputError, InputSpec, RawRow, Reject, row_where
from pipeline.input.validation import raw_text, validate
from pipeline.solution import Solution
from pipeline.storage.atomic import AtomicFile

logger = logging.getLogger(__name__)

_U64 = (1 << 64) - 1
_MERGE_AT = 1 << 18  # index entries kept in a dict before they are merged into the sorted arrays


def _id_hash(sid: str) -> int:
    """An id's 64-bit hash (Python's string hash: stable within the pass, which is all it must be)."""
    return hash(sid) & _U64


@dataclass
class IngestStats:
    """What a pass over the input saw."""

    files: int = 0
    rows: int = 0  # rows read (blank JSONL lines are not rows)
    solutions: int = 0  # valid solutions, each content once (new and known)
    rejected: int = 0  # rows (or whole files) rejected
    duplicates: int = 0  # exact duplicates skipped (same id and content as an earlier row)
    same_content: int = 0  # rows skipped for the content of an earlier row with another id
    known: int = 0  # solutions left out because their content key is in ``known`` (e.g. the corpus's)
    first_duplicate: str = ""  # "X duplicates Y" for the first one, for messages


class GoldCheck:
    """A batch gold-answer check (``check(golds) -> [reason or None]``) with a bounded memo of its answers.

    Many solutions share a problem's gold answer: each distinct gold is read once (``mcprm plan`` and the
    run's own pass share the memo through :func:`pipeline.run.plan.gold_check`).
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
        raw.file, raw.row, spec.answer_field, f"gold answer cannot be read by the grader: {why}", raw_text(raw),
        raw.kind))


def _prompt_checked(spec: InputSpec, rows: Checked) -> Checked:
    """Reject the rows whose prompt ``spec.prompt_check`` says cannot fit the model, in batches."""
    if spec.prompt_check is None:
        return rows

    def reject(raw: RawRow, why: str) -> Reject:
        return Reject(raw.file, raw.row, _longest_field(spec, raw.data), why, raw_text(raw), raw.kind)

    check = spec.prompt_check

    def quiet_check(sols):
        # transformers warns "Token indices sequence length is longer than the specified maximum sequence
        # length" when it counts an over-long prompt: the reject's own message says it better (file, row, length and limit)
        import logging

        tok_log = logging.getLogger("transformers.tokenization_utils_base")
        level = tok_log.level
        tok_log.setLevel(logging.ERROR)
        try:
            return check(sols)
        finally:
            tok_log.setLevel(level)

    return _batch_checked(rows, quiet_check, reject)


def _longest_field(spec: InputSpec, data) -> str:
    """The field a too-long prompt is blamed on: the problem when it is longer than the steps together (a 50 KB
    problem is the problem's fault), else the steps (or the solution text they were cut from)."""
    steps_fld = spec.steps_field if isinstance(data, dict) and data.get(spec.steps_field) is not None \
        else spec.solution_field
    if not isinstance(data, dict):
        return steps_fld
    steps = data.get(steps_fld)
    steps_len = sum(len(str(x)) for x in steps) if isinstance(steps, list | tuple) else len(str(steps or ""))
    return spec.problem_field if len(str(data.get(spec.problem_field) or "")) > steps_len else steps_fld



class _KeyMap:
    """64-bit keys -> int, compact: a sorted numpy array (12 bytes an entry) and a dict of the latest entries,
    merged into the array every ``merge_at`` entries. Looked up a batch at a time (:meth:`main`) plus one
    dict lookup a row, so a row costs no numpy call of its own."""

    def __init__(self, merge_at: int | None = None):
        import numpy as np

        self._np = np
        self.keys = np.empty(0, np.uint64)
        self.vals = np.empty(0, np.uint32)
        self.recent: dict[int, int] = {}
        self.merge_at = merge_at or _MERGE_AT

    def main(self, keys) -> list[int]:
        """The value of each key (a uint64 array) in the merged part, -1 where absent."""
        np = self._np
        if not len(self.keys):
            return [-1] * len(keys)
        pos = np.searchsorted(self.keys, keys)
        pos[pos == len(self.keys)] = 0
        return np.where(self.keys[pos] == keys, self.vals[pos].astype(np.int64), -1).tolist()

    def get(self, key: int, main: int) -> int | None:
        return main if main >= 0 else self.recent.get(key)

    def settle(self) -> None:
        """Merge the latest entries in (between batches only: :meth:`main` answers for the merged part)."""
        if len(self.recent) < self.merge_at:
            return
        np = self._np
        k = np.fromiter(self.recent.keys(), np.uint64, len(self.recent))
        v = np.fromiter(self.recent.values(), np.uint32, len(self.recent))
        order = np.argsort(k)
        k, v = k[order], v[order]
        at = np.searchsorted(self.keys, k)
        self.keys, self.vals = np.insert(self.keys, at, k), np.insert(self.vals, at, v)
        self.recent.clear()


class _Seen:
    """Every accepted row's id, content key and place, to refuse an id used again for other content and to
    skip repeated contents, in 52 bytes a row and its id (10 M rows: ~600 MB) instead of a dict of strings.

    Ids are found by a 64-bit hash and then compared in full (given ids are kept as UTF-8 bytes, derived ids
    are the content key itself), so a hash collision never merges two ids; content keys are 64-bit
    numbers (``content_key`` is 16 hex digits), compared exactly."""

    def __init__(self):
        self.key = array("Q")  # content key of accepted row j
        self.file = array("I")
        self.row = array("q")
        self.id_end = array("Q", [0])  # given ids: id_bytes[id_end[j]:id_end[j+1]]; empty for a derived id
        self.id_bytes = bytearray()
        self.files: list[tuple[str, str]] = []
        self._file_index: dict[str, int] = {}
        self.ids = _KeyMap()  # hash(id) -> j
        self.collided: dict[str, int] = {}  # ids whose hash an earlier, other id has
        self.contents = _KeyMap()  # content key -> j of its first row

    def id_of(self, j: int) -> str:
        a, b = self.id_end[j], self.id_end[j + 1]
        return self.id_bytes[a:b].decode() if b > a else format(self.key[j], "016x")

    def where(self, j: int) -> str:
        file, kind = self.files[self.file[j]]
        return row_where(file, self.row[j], kind)

    def add(self, sol: Solution, raw: RawRow, key: int, derived: bool) -> int:
        fi = self._file_index.get(raw.file)
        if fi is None:
            fi = self._file_index[raw.file] = len(self.files)
            self.files.append((raw.file, raw.kind))
        j = len(self.key)
        self.key.append(key)
        self.file.append(fi)
        self.row.append(raw.row)
        if not derived:
            self.id_bytes += sol.id.encode()
        self.id_end.append(len(self.id_bytes))
        return j


def _unique(spec: InputSpec, rows: Checked, seen: _Seen, stats: IngestStats, known
            ) -> Iterator[tuple[RawRow, Solution | Reject | None, str, bool]]:
    """Check ids and contents against every earlier row, a batch of rows at a time (lookups), one row at a time
    (updates: rows after the one a consumer stops at are never recorded). Yields ``(raw, out, key, is_known)``:
    ``out`` a Solution seen for the first time (``key``: its content key), a Reject, or None for a repeat."""
    import numpy as np

    batch: list[tuple[RawRow, Solution | Reject]] = []

    def flush() -> Iterator[tuple[RawRow, Solution | Reject | None, str, bool]]:
        valid = [(raw, out) for raw, out in batch if isinstance(out, Solution)]
        derived = [raw.data.get(spec.id_field) is None for raw, _ in valid]  # then the id is the content key
        hexes = [out.id if d else out.key for (_, out), d in zip(valid, derived, strict=True)]
        keys = [int(k, 16) for k in hexes]
        hashes = [_id_hash(out.id) for _, out in valid]
        karr = np.array(keys, np.uint64)
        id_main = seen.ids.main(np.array(hashes, np.uint64))
        key_main = seen.contents.main(karr)
        if known is not None and len(known) and valid:
            pos = np.minimum(np.searchsorted(known, karr), len(known) - 1)
            in_known = (known[pos] == karr).tolist()
        else:
            in_known = [False] * len(valid)
        n = 0
        for raw, out in batch:
            if not isinstance(out, Solution):
                yield raw, out, "", False
                continue
            i, n = n, n + 1
            h, key = hashes[i], keys[i]
            j = seen.ids.get(h, id_main[i])
            collided = j is not None and seen.id_of(j) != out.id
            if collided:
                j = seen.collided.get(out.id)
            if j is not None:
                if seen.key[j] == key:  # the same id and content: an exact duplicate, skipped
                    stats.duplicates += 1
                    if not stats.first_duplicate:
                        stats.first_duplicate = f"{raw.where} duplicates {seen.where(j)}"
                    yield raw, None, "", False
                else:
                    yield raw, Reject(raw.file, raw.row, spec.id_field, f"id {out.id!r} is already used by "
                                      f"{seen.where(j)} for different content; ids must be unique", raw_text(raw),
                                      raw.kind), "", False
                continue
            j = seen.add(out, raw, key, derived[i])
            if collided:
                seen.collided[out.id] = j
            else:
                seen.ids.recent[h] = j
            if seen.contents.get(key, key_main[i]) is not None:  # another id, the same content
                stats.same_content += 1
                yield raw, None, "", False
                continue
            seen.contents.recent[key] = j
            yield raw, out, hexes[i], in_known[i]
        seen.ids.settle()
        seen.contents.settle()

    for item in rows:
        batch.append(item)
        if len(batch) >= files.BATCH_ROWS:
            yield from flush()
            batch = []
    if batch:
        yield from flush()


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


def iter_keyed_solutions(
    spec: InputSpec,
    skip_bad: bool = False,
    on_reject: Callable[[Reject], None] | None = None,
    stats: IngestStats | None = None,
    *,
    limit: int | None = None,
    known=None,
    on_solution: Callable[[Solution], None] | None = None,
) -> Iterator[tuple[str, Solution]]:
    """The one pass over the input: ``(content key, solution)`` of every valid solution, each content once
    (the first row that has it), in input order, with bounded memory (the module's indexes only).

    Without ``skip_bad`` every row is validated (past ``limit`` too) and :class:`InputError`, naming the
    first 5 bad rows and their number, is raised after the last row: act on what was yielded (start
    rollouts) only once the iterator is exhausted. With ``skip_bad`` every reject goes to ``on_reject``
    (required; e.g. a :class:`RejectsWriter`) and reading stops at ``limit``. ``limit``: at most this many
    solutions, ``known`` ones included. ``known``: a sorted numpy uint64 array of content keys
    (:func:`key_numbers`) to leave out, counted in ``stats.known``. ``on_solution`` sees every solution
    counted, ``known`` ones included. ``stats`` is filled as rows stream.
    """
    if skip_bad and on_reject is None:
        raise ValueError("skip_bad needs on_reject (e.g. a RejectsWriter) so that no row is dropped silently")
    stats = stats if stats is not None else IngestStats()
    urls = resolve_files(spec)  # a missing input is named now, before anything is read
    stats.files = len(urls)
    shown: list[Reject] = []

    def checked_rows() -> Checked:
        for raw in iter_rows(spec, urls):
            if raw.row is not None:
                stats.rows += 1
            yield raw, validate(raw, spec)

    def gen() -> Iterator[tuple[str, Solution]]:
        rows = _prompt_checked(spec, _gold_checked(spec, checked_rows()))
        for _raw, out, key, is_known in _unique(spec, rows, _Seen(), stats, known):
            if isinstance(out, Reject):
                stats.rejected += 1
                if skip_bad:
                    on_reject(out)
                elif len(shown) < 5:
                    shown.append(out)
                continue
            if out is None or (limit is not None and stats.solutions >= limit):
                continue
            stats.solutions += 1
            if on_solution is not None:
                on_solution(out)
            if is_known:
                stats.known += 1
            else:
                yield key, out
            if skip_bad and limit is not None and stats.solutions >= limit:
                break
        if stats.duplicates:
            logger.warning("skipped %d exact duplicate row(s) (same id and content as an earlier row; first: %s)",
                           stats.duplicates, stats.first_duplicate)
        if stats.same_content:
            logger.info("skipped %d row(s) with the content of an earlier row under another id", stats.same_content)
        if stats.rejected and not skip_bad:
            raise InputError(_error_message(shown, stats.rejected), shown)

    return gen()


class RejectsWriter:
    """Writes rejects as JSON Lines (file, row, where, field, reason, raw) to an fsspec URL, opened at the first
    reject (no reject, no file).

    Local files are written under a temporary name and renamed on close; object stores publish the file
    when it is closed. Use as a context manager and as the ``on_reject`` callback.
    """

    def __init__(self, path: str):
        self.path = path
        self.count = 0
        self._f = None

    def _open(self):
        from pipeline.storage.fs import filesystem, is_local

        fs, target = filesystem(self.path)
        self._local = is_local(fs)
        if self._local:
            return AtomicFile(target)
        parent = fs._parent(target)
        if parent:
            fs.makedirs(parent, exist_ok=True)
        return fs.open(target, "wb")

    def __call__(self, reject: Reject) -> None:
        self.write(reject)

    def write(self, reject: Reject) -> None:
        if self._f is None:
            self._f = self._open()
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
