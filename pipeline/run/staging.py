"""Staged shards: the run's solutions, cut into its planned shards by the one pass over the input and kept
beside the output until the version is committed, so that executing, resuming a killed run and retrying a
shard read them, never the input again.

Staged shards are Parquet files ``data/vNNNNN/_staged/<name>.parquet`` (id, problem, answer, steps, source,
key) holding consecutive shards, one row group each, about :data:`GROUP_ROWS` rows a file (few files: one
atomic, fsynced write each, cheap on object stores too). ``<name>`` is a digest of what the file holds
(every row's key, id and source), so a file of that name is that content: a re-run of the same work finds its
files already there and does not write them again, and runs with other shard boundaries never overwrite each
other's files. The plan records per shard its file and row group, its row count and a digest of its keys
(:func:`key_digest`), never the keys themselves: small at 10 M rows, and enough to tell a changed input.

Shard sizes come from :func:`pipeline.execution.sizing.shard_sizes`, which needs the number of solutions,
known only at the end of the pass. It keeps every shard at ``shard_size`` while more than ``4 * workers *
shard_size`` solutions are left, so :class:`Stager` cuts a full shard as soon as more than that many
solutions are waiting, and the last ones (at most that many) at the end: its memory is bounded by the
configuration (that many solutions, plus one file's worth), not by the input.
"""

from __future__ import annotations

import hashlib
import io
import posixpath

from pipeline.solution import Solution
from pipeline.storage.store import STAGED, CorpusStore, ShardError


def key_digest(keys) -> str:
    """16 hex digits of sha256 over the content keys in order (a shard's fingerprint in the plan)."""
    h = hashlib.sha256()
    for k in keys:
        h.update(k.encode() + b"\n")
    return h.hexdigest()[:16]


def _schema():
    import pyarrow as pa

    return pa.schema([("id", pa.string()), ("problem", pa.string()), ("answer", pa.string()),
                      ("steps", pa.list_(pa.string())), ("source", pa.string()), ("key", pa.string())])


GROUP_ROWS = 16384  # rows of consecutive shards written to one staged file


def _encode(shards: list[list[tuple[str, Solution]]]) -> tuple[str, bytes]:
    """(name, Parquet bytes) of a staged file of consecutive shards of ``(key, solution)`` rows, one row group
    a shard."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    name = hashlib.sha256()
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, _schema(), compression="zstd") as w:
        for rows in shards:
            for key, s in rows:
                name.update(f"{key}\t{s.id}\t{s.source}\n".encode())
            name.update(b"\n")  # where a shard ends
            w.write_table(pa.table({
                "id": [s.id for _, s in rows], "problem": [s.problem for _, s in rows],
                "answer": [s.answer for _, s in rows], "steps": [list(s.steps) for _, s in rows],
                "source": [s.source for _, s in rows], "key": [k for k, _ in rows]}, schema=_schema()),
                row_group_size=len(rows))
    return name.hexdigest()[:32], buf.getvalue()


class Stager:
    """Receives the run's new solutions in input order (:meth:`add`) and writes them as staged shards of the
    sizes ``shard_sizes`` gives (:meth:`finish` returns the plan's shard entries)."""

    def __init__(self, store: CorpusStore, vdir: str, shard_size: int, workers: int, cost=None):
        self.store, self.dir = store, posixpath.join(vdir, STAGED)
        # cost(n_steps) -> expected work of a solution (sizing.solution_cost): the last, smaller shards are cut
        # to equal work rather than equal counts (sizing.weighted_cuts); None = by count
        self.cost = cost
        self.shard_size, self.workers = shard_size, max(1, int(workers))
        self.lookahead = 4 * self.workers * shard_size  # sizes are shard_size while more than this is left
        self.pending: list[tuple[str, Solution]] = []  # solutions not cut into a shard yet
        self.group: list[list[tuple[str, Solution]]] = []  # shards cut, not written yet
        self.shards: list[dict] = []
        self.written: list[str] = []  # files this pass wrote (removed again if the pass fails)
        self.n = 0
        self._all = hashlib.sha256()

    def add(self, key: str, sol: Solution) -> None:
        self.pending.append((key, sol))
        self.n += 1
        self._all.update(key.encode() + b"\n")
        if len(self.pending) > self.lookahead:
            self._cut(self.shard_size)

    def _cut(self, size: int) -> None:
        rows, self.pending = self.pending[:size], self.pending[size:]
        self.shards.append({"shard": len(self.shards), "rows": len(rows), "keys": key_digest(k for k, _ in rows),
                            "staged": None, "group": len(self.group)})
        self.group.append(rows)
        if sum(len(g) for g in self.group) >= GROUP_ROWS:
            self._write()

    def _write(self) -> None:
        if not self.group:
            return
        name, data = _encode(self.group)
        rel = f"{self.dir}/{name}.parquet"
        if self.store.size(rel) is None:  # a file of this name holds exactly these rows (module doc)
            self.store.write_bytes(rel, data)
            self.written.append(rel)
        for sh in self.shards[len(self.shards) - len(self.group) :]:
            sh["staged"] = name
        self.group = []

    def finish(self) -> tuple[list[dict], str]:
        """The plan's shard entries, and the digest of every key in order (the run's input, fingerprinted)."""
        from pipeline.execution.sizing import shard_sizes

        sizes = shard_sizes(self.n, self.shard_size, self.workers)
        head = [sh["rows"] for sh in self.shards]
        if sizes[: len(head)] != head:
            raise RuntimeError(f"shard_sizes({self.n}, {self.shard_size}, {self.workers}) does not keep full "
                               f"shards while more than {self.lookahead} solutions are left, as staging needs")
        tail = sizes[len(head) :]
        if self.cost is not None and len(tail) > 1:
            from pipeline.execution.sizing import weighted_cuts

            tail = weighted_cuts([self.cost(len(s.steps)) for _, s in self.pending], tail)
        for size in tail:
            self._cut(size)
        self._write()
        return self.shards, self._all.hexdigest()[:32]

    def discard(self) -> None:
        """Remove the files this pass wrote (the pass failed: nothing refers to them). Best effort: the
        failure being reported may be the storage's own, and a file left here is removed by the next run."""
        for rel in self.written:
            try:
                self.store.delete(rel)
            except Exception:  # noqa: BLE001
                pass


def staged_rel(vdir: str, entry: dict) -> str:
    return f"{vdir}/{STAGED}/{entry['staged']}.parquet"


def read_staged(store: CorpusStore, vdir: str, entry: dict) -> list[Solution]:
    """A planned shard's solutions from its staged file, checked against the plan (row count, digest of the
    keys recomputed from the content). A missing or damaged file is a :class:`ShardError`; a damaged one is
    removed, so that the same command run again stages it anew from the input."""
    import pyarrow.parquet as pq

    rel = staged_rel(vdir, entry)
    try:
        try:
            with store.fs.open(store.path(rel), "rb") as f:
                cols = pq.ParquetFile(f).read_row_group(entry["group"], use_threads=False).to_pydict()
        except FileNotFoundError as e:
            raise ShardError("missing") from e
        except Exception as e:  # ArrowInvalid, OSError (ZSTD, truncated footer), a row group not there, ...
            raise ShardError(f"{type(e).__name__}: {e}") from e
        sols = [Solution(id=i, problem=p, answer=a, steps=tuple(st), source=src) for i, p, a, st, src in
                zip(cols["id"], cols["problem"], cols["answer"], cols["steps"], cols["source"], strict=True)]
        if len(sols) != entry["rows"] or key_digest(s.key for s in sols) != entry["keys"]:
            raise ShardError("it does not hold the planned solutions")
    except (ShardError, KeyError, TypeError, ValueError) as e:
        store.delete(rel)
        raise ShardError(f"staged shard {store.uri(rel)} of shard {entry['shard']} is missing or damaged ({e}); "
                         "rerun the same command to stage it again from the input") from e
    return sols


def staged_keys(store: CorpusStore, vdir: str, entry: dict) -> list[str]:
    """The content keys of a planned shard, in order (to check a finished shard of a killed run)."""
    return [s.key for s in read_staged(store, vdir, entry)]


def staged_names(store: CorpusStore, vdir: str) -> set[str]:
    """Names of the staged files present under ``vdir``."""
    if not store.local:
        store.fs.invalidate_cache()  # object-store listings are cached by fsspec
    try:
        found = store.fs.ls(store.path(vdir, STAGED), detail=False)
    except FileNotFoundError:
        return set()
    return {posixpath.basename(f)[: -len(".parquet")] for f in found if f.endswith(".parquet")}
