"""The output corpus on any fsspec URL: versioned shards, an atomic commit point, a lock.

Layout of an output folder::

    OUT/versions/v00002.json           every committed version's manifest, created once (exclusively), never
                                       overwritten: **the commit point** (config, versions, counts, shard list)
    OUT/manifest.json                  a copy of the newest committed version, for readers that start there;
                                       only ever replaced by a newer version (it may lag behind versions/)
    OUT/data/v00002/part-00000.<owner>.<attempt>.parquet
                                       a shard written by version 2 (a refresh adds a new v-folder and lists
                                       old and new shards in its manifest)
    OUT/data/v00003/_plan.json         an uncommitted run's plan (identity; per shard its staged file, rows and
                                       key digest), for resume
    OUT/data/v00003/_staged/*.parquet  an uncommitted run's input, cut into its shards (pipeline.run.staging)
    OUT/rejects/v00002.jsonl           rows rejected by --skip-bad in version 2
    OUT/_lock                          held while a run writes (see :mod:`pipeline.storage.lock`)

Every file is written whole under its final name in one step: on a local disk through a temporary name and a
rename (then the folder is flushed); on object storage with a single PUT, which is atomic there. A shard exists
completely or not at all, so a run killed at any moment leaves nothing half-written.

**What counts** (``docs/storage.md``): a version is committed when its ``versions/vNNNNN.json`` is created by
an exclusive create, and only then; ``manifest.json`` is a copy of the newest committed version, written after
it and never replaced by an older one (:meth:`CorpusStore.write_manifest`). A run that takes over the lock of
an owner that may still be alive first creates the next version file itself as a *fence*
(``{"format": "mcprm-fenced-version"}``, never a version): the old owner's exclusive create of that number then
fails, whatever the timing, and the new owner commits the number after it. Readers, the manifest recovery of
``label`` and ``mcprm verify`` skip fences. Shards are written under names that carry the writing owner's id
and an id of the attempt (``part-00003.<owner>.<attempt>.parquet``), so neither an owner that lost its lock
nor a retried task of the same owner can overwrite a shard a manifest records.

All I/O goes through the fsspec filesystem of the URL (on a local disk the renames and hard links too), the one
seam the chaos tests wrap (``tests/integration/test_takeover.py``).
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import uuid
from typing import Any

from pipeline.storage.atomic import AtomicFile, fsync_dir
from pipeline.storage.conditional import ConditionalWrites
from pipeline.storage.errors import CommitConflict as CommitConflict
from pipeline.storage.errors import ShardError, StorageError
from pipeline.storage.fs import cat_whole, filesystem, is_local, s3_bucket
from pipeline.storage.versions import FENCED_FORMAT as FENCED_FORMAT
from pipeline.storage.versions import VersionFiles
from pipeline.storage.versions import is_fenced as is_fenced

STAGED = "_staged"  # data/vNNNNN/_staged/: a run's staged input (pipeline.run.staging), kept until commit

# S3 has no folders: s3fs's makedirs of a key only makes sure its bucket exists (a HEAD of the bucket, which is
# created when absent). Once one write in this process has done that for a bucket, the later writes there skip it:
# one request less per file written. Keyed like the conditional-write probes (filesystem class, bucket).
_BUCKETS_MADE: set[tuple] = set()


def new_attempt() -> str:
    """An id of one attempt at writing a shard (a task Ray resubmits while the first attempt still runs gets
    another one, so the two never write the same name)."""
    return uuid.uuid4().hex[:8]


class Fenced(int):
    """A version number that carries the id of the lock owner writing it (``OutputLock.owner``): shard paths
    made from it (:meth:`CorpusStore.shard_rel`) carry that id, so shards written by an owner that lost its lock
    never land on a name its successor records. It travels to workers (Ray actors) like the plain number."""

    owner: str

    def __new__(cls, version: int, owner: str):
        self = super().__new__(cls, version)
        self.owner = owner
        return self

    def __reduce__(self):
        return (Fenced, (int(self), self.owner))

    def __repr__(self) -> str:
        return f"Fenced({int(self)}, {self.owner!r})"



def digest(data: bytes) -> dict:
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def sidecar_rel(shard_rel: str) -> str:
    """Where a shard's checksum is written before the shard itself (``part-00000.sum.json``)."""
    return shard_rel[: -len(".parquet")] + ".sum.json" if shard_rel.endswith(".parquet") else shard_rel + ".sum.json"


def _join(*parts: str) -> str:
    return posixpath.join(*parts)


class CorpusStore(ConditionalWrites, VersionFiles):
    """An output folder on any fsspec URL: paths, atomic file I/O and shards here; the conditional writes
    (:mod:`pipeline.storage.conditional`) and the version files (:mod:`pipeline.storage.versions`) are its parts."""

    def __init__(self, url: str, storage_options: dict | None = None):
        self.url = url
        self.storage_options = dict(storage_options or {})  # what a reader outside fsspec (polars) must be given
        self.fs, root = filesystem(url, storage_options)
        self.root = root.rstrip("/") or "/"
        self.local = is_local(self.fs)

    @classmethod
    def for_file(cls, url: str, storage_options: dict | None = None) -> tuple[CorpusStore, str]:
        """A store rooted at the folder of the file ``url``, and the file's name (for atomic single files)."""
        fs, path = filesystem(url, storage_options)
        self = cls.__new__(cls)
        self.url = url
        self.storage_options = dict(storage_options or {})
        self.fs = fs
        self.root = posixpath.dirname(path) or "."
        self.local = is_local(fs)
        return self, posixpath.basename(path)

    # ---------------------------------------------------------------- paths
    def path(self, *parts: str) -> str:
        return _join(self.root, *parts)

    def version_dir(self, version: int) -> str:
        return f"data/v{version:05d}"

    def shard_rel(self, version: int, shard: int, attempt: str | None = None) -> str:
        """Where a shard is written: ``part-00003.<owner>.<attempt>.parquet`` for a :class:`Fenced` version and
        an ``attempt`` (:func:`new_attempt`: a worker labeling it), ``part-00003.<owner>.parquet`` for a shard
        a resumed run adopts, ``part-00003.parquet`` for a plain number (older runs; still read and resumed)."""
        owner = version.owner if isinstance(version, Fenced) else None
        tail = (f".{owner}" if owner else "") + (f".{attempt}" if owner and attempt else "")
        return f"{self.version_dir(version)}/part-{shard:05d}{tail}.parquet"

    def shard_files(self, version: int) -> dict[int, list[str]]:
        """The shard files in ``data/vNNNNN`` by shard index: any owner's names and the name older runs used
        (what an unfinished run left, for resume)."""
        if not self.local:
            self.fs.invalidate_cache()
        try:
            names = self.fs.ls(self.path(self.version_dir(version)), detail=False)
        except FileNotFoundError:
            return {}
        out: dict[int, list[str]] = {}
        for n in sorted(names):
            b = posixpath.basename(n)
            if not (b.startswith("part-") and b.endswith(".parquet")) or ".tmp-" in b:
                continue
            idx = b[len("part-"):].split(".", 1)[0]
            if idx.isdigit():
                out.setdefault(int(idx), []).append(f"{self.version_dir(version)}/{b}")
        return out

    def uri(self, rel: str) -> str:
        """A full URL for ``rel`` (what readers outside mcprm should open)."""
        full = self.path(rel)
        return full if self.local else self.fs.unstrip_protocol(full)

    # ---------------------------------------------------------------- atomic I/O
    def _write_tmp(self, full: str, data: bytes) -> AtomicFile:
        """``data`` written to disk under a temporary name beside ``full``, not yet published."""
        af = AtomicFile(full)
        try:
            af.write(data)
            af.finish()
        except BaseException:
            af.discard()
            raise
        return af

    def _publish_local(self, full: str, data: bytes, exclusive: bool) -> None:
        """A local file written whole under a temporary name, then renamed over ``full`` (or hard-linked to it:
        FileExistsError if it exists), through the filesystem object (the seam the chaos tests wrap), then the
        folder flushed so that the rename survives a power loss."""
        af = self._write_tmp(full, data)
        try:
            if exclusive:
                self.fs.link(af.tmp, full)
            else:
                self.fs.mv(af.tmp, full)
        finally:
            af.discard()  # the temporary name (already gone after a rename)
        fsync_dir(posixpath.dirname(full))

    def _make_parent(self, parent: str) -> None:
        """The folder ``parent`` made for a write on a filesystem other than a local disk (on S3: its bucket,
        once per bucket and process)."""
        bucket = s3_bucket(self.fs, parent)
        key = None if bucket is None else (type(self.fs), bucket)
        if key is not None and key in _BUCKETS_MADE:
            return
        self.fs.makedirs(parent, exist_ok=True)
        if key is not None:
            _BUCKETS_MADE.add(key)

    def write_bytes(self, rel: str, data: bytes) -> None:
        full = self.path(rel)
        parent = posixpath.dirname(full)
        try:
            if self.local:
                self._publish_local(full, data, exclusive=False)
            else:
                self._make_parent(parent)
                self.fs.pipe_file(full, data)  # one PUT: atomic on object stores
        except StorageError:
            raise
        except OSError as e:
            if isinstance(e, FileNotFoundError) and not self.local:
                raise
            raise StorageError.while_doing(e, self.uri(rel), "writing") from e
    def create_bytes(self, rel: str, data: bytes) -> None:
        """Write ``rel`` only if it does not exist (FileExistsError otherwise), whole or not at all.

        Local disk: a temporary file hard-linked to the final name (``link`` fails if the name exists, so
        exactly one of many concurrent creators wins, and nobody ever sees a partial file). Object stores: an
        exclusive (``"xb"``) open, a conditional PUT; a backend without one is refused
        (:meth:`require_exclusive_create`), never replaced by an exists-then-put."""
        full = self.path(rel)
        try:
            if self.local:
                self._publish_local(full, data, exclusive=True)
                return
            self.require_exclusive_create()
            self._make_parent(posixpath.dirname(full))
            with self.fs.open(full, "xb") as f:
                f.write(data)
        except (FileExistsError, StorageError):
            raise
        except OSError as e:
            raise StorageError.while_doing(e, self.uri(rel), "writing") from e

    def create_json(self, rel: str, obj: Any) -> None:
        self.create_bytes(rel, (json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n").encode())


    def read_bytes(self, rel: str) -> bytes:
        """The whole file. On an object store one GET of the whole object: a snapshot of it even while another
        writer replaces it (a file object would pin the object's ETag and fail mid-read, e.g. s3fs's
        "no longer exists", when the lock's heartbeat or a commit replaces it)."""
        full = self.path(rel)
        if self.local:
            with self.fs.open(full, "rb") as f:
                return f.read()
        self.fs.invalidate_cache(full)
        return cat_whole(self.fs, full)

    def size(self, rel: str) -> int | None:
        """The file's size in bytes, or None if it does not exist."""
        full = self.path(rel)
        try:
            if not self.local:
                self.fs.invalidate_cache(full)
            return int(self.fs.info(full)["size"])
        except FileNotFoundError:
            return None

    def write_json(self, rel: str, obj: Any) -> None:
        self.write_bytes(rel, (json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n").encode())

    def read_json(self, rel: str) -> Any | None:
        try:
            return json.loads(self.read_bytes(rel).decode())
        except FileNotFoundError:
            return None
        except json.JSONDecodeError as e:
            raise RuntimeError(f"{self.uri(rel)} is corrupt ({e}); restore it from versions/ or rerun") from e

    def exists(self, rel: str) -> bool:
        if not self.local:
            self.fs.invalidate_cache()  # object-store listings are cached by fsspec; another writer may have changed them
        return self.fs.exists(self.path(rel))

    def delete(self, rel: str, recursive: bool = False) -> None:
        try:
            self.fs.rm(self.path(rel), recursive=recursive)
        except FileNotFoundError:
            pass

    def write_table(self, rel: str, table, counts: dict | None = None, extra: dict | None = None) -> dict:
        """Write a shard: its checksum sidecar first, then the shard (both atomically). Returns
        ``{"bytes", "sha256"}``. A shard without a sidecar, or that does not match it, is never kept.
        ``counts``: the worker's counters for the shard (steps, rollouts, reused rollouts, ...), kept in the
        sidecar so that a resumed run counts a finished shard exactly as the run that labeled it. ``extra``:
        more sidecar fields (rows the worker quarantined). A corpus shard's sidecar also lists its keys, so that
        the rows of a shard damaged later can still be named."""
        import pyarrow.parquet as pq

        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        keys = table.column("key").to_pylist() if "key" in table.column_names else None
        return self.write_shard_bytes(rel, buf.getvalue(), table.num_rows, counts, keys=keys, extra=extra)

    def write_shard_bytes(self, rel: str, data: bytes, rows: int, counts: dict | None = None,
                          keys: list[str] | None = None, extra: dict | None = None) -> dict:
        d = digest(data)
        side = dict(d, rows=rows)
        if counts:
            side["counts"] = counts
        if keys is not None:
            side["keys"] = keys
        side.update(extra or {})
        self.write_json(sidecar_rel(rel), side)
        self.write_bytes(rel, data)
        return d

    def read_table(self, rel: str, columns: list[str] | None = None):
        """Read a shard (unchecked: :func:`pipeline.storage.integrity.load_shard` reads one in full and checks
        it). Any failure is a :class:`ShardError` naming the file, never a bare ArrowInvalid."""
        import pyarrow.parquet as pq

        try:
            # use_threads=False: pyarrow's threaded reader on a Python file object can abort the interpreter at
            # exit ("terminate called without an active exception", seen with pyarrow 25 and 26 in ~1 run of
            # 3); shards are small, so one thread costs little. A local shard is read natively (no Python file
            # object at all).
            if self.local:
                return pq.read_table(self.path(rel), columns=columns, use_threads=False)
            with self.fs.open(self.path(rel), "rb") as f:
                return pq.read_table(f, columns=columns, use_threads=False)
        except FileNotFoundError as e:
            raise ShardError(f"shard {self.uri(rel)} is missing") from e
        except Exception as e:  # ArrowInvalid, OSError (ZSTD, truncated footer), ...
            raise ShardError(f"shard {self.uri(rel)} is unreadable ({type(e).__name__}: {e})") from e

    def is_empty(self) -> bool:
        try:
            return not self.fs.ls(self.root, detail=False)
        except FileNotFoundError:
            return True
