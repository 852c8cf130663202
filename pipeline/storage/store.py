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
    OUT/data/v00003/_staged/*.parquet  an uncommitted run's input, cut into its shards (pipeline.input.staging)
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
import logging
import posixpath
import threading
import time
import uuid
from typing import Any

from pipeline.errors import FatalError
from pipeline.storage.atomic import AtomicFile, fsync_dir

log = logging.getLogger("mcprm")

MANIFEST = "manifest.json"
FENCED_FORMAT = "mcprm-fenced-version"  # a version number burnt at a takeover: never a version
STAGED = "_staged"  # data/vNNNNN/_staged/: a run's staged input (pipeline.input.staging), kept until commit


def is_fenced(m: Any) -> bool:
    """Whether a version file is a fence (a number a takeover claimed so that the old owner cannot commit it)."""
    return isinstance(m, dict) and m.get("format") == FENCED_FORMAT


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


class StorageError(FatalError, OSError):
    """A write or read of the output failed (disk full, read-only, permission): the message names the file.
    ``message``: where set (:meth:`said`), the whole story — what failed, where, what to do — printed as is."""

    message: str | None = None

    @classmethod
    def said(cls, message: str, errno: int | None = None) -> StorageError:
        err = cls(errno, message) if errno is not None else cls(message)
        err.message = message
        return err


# Packages whose exceptions are failures of the storage itself (credentials, permissions, a missing bucket, the
# network), whatever fsspec backend raised them.
class CommitConflict(FatalError, RuntimeError):
    """The version this run was to commit exists already (only when two runs wrote without the lock, e.g. after
    its file was deleted by hand: a takeover never leads here)."""


class ShardError(FatalError, RuntimeError):
    """A shard that is missing, truncated, corrupt or not what the manifest says; the message names the file."""


def digest(data: bytes) -> dict:
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def sidecar_rel(shard_rel: str) -> str:
    """Where a shard's checksum is written before the shard itself (``part-00000.sum.json``)."""
    return shard_rel[: -len(".parquet")] + ".sum.json" if shard_rel.endswith(".parquet") else shard_rel + ".sum.json"


def _join(*parts: str) -> str:
    return posixpath.join(*parts)


def _is_local(fs) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def _is_memory(fs) -> bool:
    from fsspec.implementations.memory import MemoryFileSystem

    return isinstance(fs, MemoryFileSystem)


def _is_s3(fs) -> bool:
    try:
        from s3fs import S3FileSystem
    except ImportError:
        return False
    return isinstance(fs, S3FileSystem)


def _newer(raw: bytes | None, version: int) -> bool:
    """Whether ``version`` is newer than the manifest copy ``raw`` (True when missing or unreadable)."""
    try:
        cur = json.loads(raw.decode()).get("version") if raw is not None else None
    except (ValueError, UnicodeDecodeError, AttributeError):
        cur = None
    return not isinstance(cur, int) or cur < version


def _precondition_failed(e: BaseException) -> bool:
    """Whether an object store refused a conditional write or delete because the object changed (HTTP 412)."""
    for err in (e, e.__cause__, e.__context__):
        code = (getattr(err, "response", None) or {}).get("Error", {}).get("Code")
        if code in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
            return True
    return "PreconditionFailed" in str(e) or "pre-conditions you specified did not hold" in str(e)


# Whether a backend's exclusive create is real, probed once per filesystem class and bucket (see
# CorpusStore.exclusive_create); the same for its conditional replace and delete (CorpusStore.conditional_replace).
_EXCLUSIVE: dict[tuple, bool] = {}
_CONDITIONAL: dict[tuple, bool] = {}
# memory:// lives in this process only: a compare-and-swap under one mutex is a real conditional write there
_MEMORY_CAS = threading.Lock()


class CorpusStore:
    def __init__(self, url: str, storage_options: dict | None = None):
        import fsspec

        self.url = url
        self.fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
        self.root = root.rstrip("/") or "/"
        self.local = _is_local(self.fs)

    @classmethod
    def for_file(cls, url: str) -> tuple[CorpusStore, str]:
        """A store rooted at the folder of the file ``url``, and the file's name (for atomic single files)."""
        import fsspec

        fs, path = fsspec.core.url_to_fs(url)
        self = cls.__new__(cls)
        self.url = url
        self.fs = fs
        self.root = posixpath.dirname(path) or "."
        self.local = _is_local(fs)
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
    def _storage_error(self, e: OSError, rel: str, doing: str) -> StorageError:
        what = e.strerror or str(e) or type(e).__name__
        return StorageError(e.errno, f"{what} while {doing} {self.uri(rel)}", self.uri(rel))

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

    def write_bytes(self, rel: str, data: bytes) -> None:
        full = self.path(rel)
        parent = posixpath.dirname(full)
        try:
            if self.local:
                self._publish_local(full, data, exclusive=False)
            else:
                self.fs.makedirs(parent, exist_ok=True)
                self.fs.pipe_file(full, data)  # one PUT: atomic on object stores
        except StorageError:
            raise
        except OSError as e:
            if isinstance(e, FileNotFoundError) and not self.local:
                raise
            raise self._storage_error(e, rel, "writing") from e

    @property
    def exclusive_create(self) -> bool:
        """Whether :meth:`create_bytes` is a real create-if-absent here. A local disk: yes (a hard link). An
        object store: probed once per filesystem class and bucket, by creating a probe object twice with an
        exclusive (``"xb"``) open, a conditional PUT (``If-None-Match``) in s3fs: the second create must fail.
        A backend (or an S3-compatible server) that ignores the condition is found out here, whatever its class
        is called."""
        if self.local:
            return True
        key = (type(self.fs), self.root.split("/", 1)[0])
        if key not in _EXCLUSIVE:
            _EXCLUSIVE[key] = self._probe_exclusive()
            if _EXCLUSIVE[key]:
                _ = self.conditional_replace  # probed together: a run does the same storage operations each time
        return _EXCLUSIVE[key]

    def _probe_exclusive(self) -> bool:
        rel = f"_probe-exclusive-{uuid.uuid4().hex[:12]}"
        full = self.path(rel)
        self.fs.makedirs(self.root, exist_ok=True)
        try:
            with self.fs.open(full, "xb") as f:
                f.write(b"1")
        except (ValueError, NotImplementedError, TypeError):  # no mode "xb" in this backend
            return False
        try:
            try:
                with self.fs.open(full, "xb") as f:
                    f.write(b"2")
            except FileExistsError:
                return True
            except (ValueError, NotImplementedError, TypeError):
                return False
            return False  # the second create went through: the condition is ignored
        finally:
            self.delete(rel)

    def require_exclusive_create(self) -> None:
        """Refuse, with what to do, a storage without a real exclusive create: without it two runs could
        both take the lock or commit the same version."""
        if not self.exclusive_create:
            msg = (f"{self.url}: this storage ({type(self.fs).__module__}.{type(self.fs).__name__}) does not "
                   "support an exclusive create (a conditional write, e.g. S3's If-None-Match: a second create of "
                   "the same name went through). mcprm needs it so that two runs can never both hold this "
                   "output's lock or commit the same version. Use a backend and server that support it (a recent "
                   "s3fs on AWS S3 or MinIO), or write the corpus to a local disk and copy the folder; see "
                   "docs/storage.md.")
            raise StorageError.said(msg)

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
            self.fs.makedirs(posixpath.dirname(full), exist_ok=True)
            with self.fs.open(full, "xb") as f:
                f.write(data)
        except (FileExistsError, StorageError):
            raise
        except OSError as e:
            raise self._storage_error(e, rel, "writing") from e

    def create_json(self, rel: str, obj: Any) -> None:
        self.create_bytes(rel, (json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n").encode())

    # ---------------------------------------------------------------- conditional replace and delete
    @property
    def conditional_replace(self) -> bool:
        """Whether :meth:`replace_if` and :meth:`delete_if` are real compare-and-swap operations here, so that a
        writer paused between its read and its write cannot replace or remove what another writer put there
        meanwhile. memory://: yes (one process; a mutex). S3 (s3fs): probed once per bucket, a PUT and a
        DELETE with ``If-Match: <ETag>``, which must fail for an ETag that is not the object's. Other object
        stores (GCS, Azure, ...): no (not implemented here). A local disk does not use them: the lock and
        ``manifest.json`` are guarded there by file descriptors and renames."""
        if self.local:
            return False
        if _is_memory(self.fs):
            return True
        if not _is_s3(self.fs):
            return False
        key = (type(self.fs), self.root.split("/", 1)[0])
        if key not in _CONDITIONAL:
            _CONDITIONAL[key] = self._probe_conditional()
        return _CONDITIONAL[key]

    def _probe_conditional(self) -> bool:
        rel = f"_probe-conditional-{uuid.uuid4().hex[:12]}"
        try:
            self.create_bytes(rel, b"1")
            _, tag = self._read_etag(rel)
            if tag is None or self.replace_if(rel, b"2", '"00000000000000000000000000000000"'):
                return False  # a write with another object's ETag went through: the condition is ignored
            if not self.replace_if(rel, b"3", tag):
                return False
            data, tag3 = self._read_etag(rel)
            if data != b"3" or self.delete_if(rel, tag):  # the old ETag must not delete the new object
                return False
            return self.delete_if(rel, tag3)
        except (ValueError, TypeError, NotImplementedError, OSError) as e:  # no such parameter in this client
            log.debug("conditional writes probe on %s failed: %s", self.url, e)
            return False
        finally:
            self.delete(rel)

    def _memory_key(self, rel: str) -> str:
        return self.fs._strip_protocol(self.path(rel))

    def read_tagged(self, rel: str) -> tuple[bytes | None, Any]:
        """The file's bytes (None: absent) and a tag of exactly that content for :meth:`replace_if` and
        :meth:`delete_if`: the object itself on memory://, the ETag on S3 (read between two HEADs that agree,
        so the bytes are those of that ETag), None where the store has no conditional writes."""
        if _is_memory(self.fs):
            with _MEMORY_CAS:
                f = self.fs.store.get(self._memory_key(rel))
                return (bytes(f.getvalue()) if f is not None else None), f
        if not self.conditional_replace:
            try:
                return self.read_bytes(rel), None
            except FileNotFoundError:
                return None, None
        return self._read_etag(rel)

    def _read_etag(self, rel: str) -> tuple[bytes | None, Any]:
        full = self.path(rel)
        for _ in range(20):
            try:
                self.fs.invalidate_cache(full)
                before = self.fs.info(full).get("ETag")
                data = self.fs.cat_file(full)
                self.fs.invalidate_cache(full)
                after = self.fs.info(full).get("ETag")
            except FileNotFoundError:
                return None, None
            if before is not None and before == after:
                return data, before
        raise StorageError.said(f"{self.uri(rel)} kept changing while it was read (20 tries); retry")

    def replace_if(self, rel: str, data: bytes, tag: Any) -> bool:
        """Write ``data`` only if the file is still the content :meth:`read_tagged` gave ``tag`` for (``tag``
        None: only if it does not exist). False when it changed meanwhile (or was removed); nothing written."""
        if tag is None:
            try:
                self.create_bytes(rel, data)
                return True
            except FileExistsError:
                return False
        if _is_memory(self.fs):
            with _MEMORY_CAS:
                if self.fs.store.get(self._memory_key(rel)) is not tag:
                    return False
                self.fs.pipe_file(self.path(rel), data)
                return True
        full = self.path(rel)
        try:
            self.fs.pipe_file(full, data, IfMatch=tag)
        except FileNotFoundError:
            return False
        except OSError as e:
            if _precondition_failed(e):
                return False
            raise self._storage_error(e, rel, "writing") from e
        finally:
            self.fs.invalidate_cache(full)
        return True

    def delete_if(self, rel: str, tag: Any) -> bool:
        """Remove the file only if it is still the content ``tag`` was read for; False when it changed."""
        if _is_memory(self.fs):
            with _MEMORY_CAS:
                key = self._memory_key(rel)
                if tag is None or self.fs.store.get(key) is not tag:
                    return False
                del self.fs.store[key]
                return True
        full = self.path(rel)
        bucket, key, _ = self.fs.split_path(full)
        try:
            self.fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=tag)
        except FileNotFoundError:
            return False
        except OSError as e:
            if _precondition_failed(e):
                return False
            raise self._storage_error(e, rel, "removing") from e
        finally:
            self.fs.invalidate_cache(full)
        return True

    def read_bytes(self, rel: str) -> bytes:
        """The whole file. On an object store one GET of the whole object: a snapshot of it even while another
        writer replaces it (a file object would pin the object's ETag and fail mid-read, e.g. s3fs's
        "no longer exists", when the lock's heartbeat or a commit replaces it)."""
        full = self.path(rel)
        if self.local:
            with self.fs.open(full, "rb") as f:
                return f.read()
        self.fs.invalidate_cache(full)
        return self.fs.cat_file(full)

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

    # ---------------------------------------------------------------- manifest
    def manifest(self) -> dict | None:
        return self.read_json(MANIFEST)

    def commit(self, manifest: dict, fence=None) -> None:
        """Commit a version: ``fence()`` (the lock check: raises LockLost if this run no longer holds the
        output), then create ``versions/vNNNNN.json`` with an exclusive create, the commit point: from here on
        the version counts. Then ``manifest.json`` (a copy) is brought up to it (:meth:`write_manifest`: never
        back to an older version), unless the lock was taken over in between (its successor writes it; readers
        follow the version file meanwhile).

        No check-then-write window is left: an owner that lost its lock after its last check finds its number
        taken by its successor's fence (:meth:`fence_next_version`), and its create fails."""
        from pipeline.storage.lock import LockLost

        v = manifest["version"]
        rel = f"versions/v{v:05d}.json"
        if fence is not None:
            fence()
        try:
            self.create_json(rel, manifest)
        except FileExistsError:
            try:
                other = self.read_json(rel)
            except RuntimeError:
                other = None
            if is_fenced(other):
                raise LockLost(
                    f"this run's lock on {self.url} was taken over by another run, which fenced version {v} "
                    f"({self.uri(rel)}) so that this run cannot commit it. Nothing was committed by this run; the "
                    "output's committed versions are untouched. Make sure only one run writes this output, then "
                    "rerun the same command.") from None
            raise CommitConflict(
                f"{self.uri(rel)} already exists: another run committed version {v}. "
                "Versions are never overwritten; nothing was committed by this run. Rerun the same command.") from None
        if fence is not None:
            try:
                fence()
            except LockLost as e:
                log.warning("committed version %d (%s), but the lock was taken over right after (%s); "
                            "manifest.json is left to the run that took over (readers follow the version file)",
                            v, self.uri(rel), str(e).split(". ")[0])
                return
        self.write_manifest(manifest)

    def write_manifest(self, manifest: dict) -> bool:
        """Replace ``manifest.json`` with ``manifest`` only if that is a newer version than the one it holds (or
        it is missing or unreadable), so that the copy does not go back in time when a writer paused after its
        commit (or a repair) writes late. Returns whether it was written.

        memory:// and S3: a compare-and-swap (:meth:`replace_if`), retried while other writers change it: the
        copy never goes back. A local disk and other object stores: re-read, write if newer, then catch up: a
        writer paused between its re-read and its write may have put back an older copy than a version
        committed meanwhile, and brings it up to the newest committed version itself right after
        (docs/storage.md)."""
        version = manifest["version"]
        if self.conditional_replace:
            data = self._manifest_bytes(manifest)
            for _ in range(100):
                raw, tag = self.read_tagged(MANIFEST)
                if not _newer(raw, version):
                    return False
                if self.replace_if(MANIFEST, data, tag):
                    return True
            raise StorageError.said(f"{self.uri(MANIFEST)} kept changing while version {version} was written to "
                                    "it (100 tries); the version is committed; run `mcprm verify --repair`")
        wrote = self._write_manifest_if_newer(manifest)
        for _ in range(10):  # catch up with versions committed while this writer was paused
            try:
                cur = json.loads(self.read_bytes(MANIFEST).decode()).get("version")
            except (FileNotFoundError, ValueError, UnicodeDecodeError, AttributeError):
                return wrote
            newer = self._newest_version_above(cur if isinstance(cur, int) else 0)
            if newer is None or not self._write_manifest_if_newer(newer):
                return wrote
        return wrote

    @staticmethod
    def _manifest_bytes(manifest: dict) -> bytes:
        return (json.dumps(manifest, indent=2, sort_keys=False, default=str) + "\n").encode()

    def _write_manifest_if_newer(self, manifest: dict) -> bool:
        try:
            raw = self.read_bytes(MANIFEST)
        except FileNotFoundError:
            raw = None
        if not _newer(raw, manifest["version"]):
            return False
        self.write_bytes(MANIFEST, self._manifest_bytes(manifest))
        return True

    def _newest_version_above(self, cur: int) -> dict | None:
        """The newest committed version file above ``cur`` that is a whole version (not a fence), or None."""
        for v in reversed([v for v in self.versions() if v > cur]):
            try:
                m = self.version_manifest(v)
            except RuntimeError:
                continue
            if isinstance(m, dict) and not is_fenced(m) and m.get("version") == v and isinstance(m.get("shards"), list):
                return m
        return None

    def next_version(self) -> int:
        """One above every version number ever used (committed, fenced, or named by manifest.json): a number
        is never used twice."""
        try:
            m = self.manifest()
        except RuntimeError:
            m = None
        cur = m.get("version") if isinstance(m, dict) and isinstance(m.get("version"), int) else 0
        return max([cur] + self.versions()) + 1

    def fence_next_version(self, stale: dict) -> int | None:
        """At a takeover from an owner that may still be alive (called by :class:`OutputLock` before it replaces
        the lock): create the next version file as a fence, so that the old owner, whatever it does from now
        on, can never commit. Returns the fenced number, or None when that number was just committed (by the
        old owner, before this takeover: its commit counts, and it has nothing left to commit)."""
        n = self.next_version()
        rec = {"format": FENCED_FORMAT, "version": n,
               "reason": "the lock was taken over from an owner that may still be running; this number is "
                         "claimed so that it cannot commit. Not a version: readers skip it.",
               "fenced_owner": {k: stale.get(k) for k in ("token", "host", "pid", "instance", "heartbeat")},
               "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        try:
            self.create_json(f"versions/v{n:05d}.json", rec)
        except FileExistsError:
            return None
        log.warning("fenced version %d at %s: the run that held the lock may still be running and can no "
                    "longer commit", n, self.uri(f"versions/v{n:05d}.json"))
        return n

    def version_manifest(self, version: int) -> dict | None:
        return self.read_json(f"versions/v{version:05d}.json")

    def is_fence(self, version: int) -> bool:
        """Whether ``versions/vNNNNN.json`` is a fence (an unreadable file is not: ``verify`` names it)."""
        try:
            return is_fenced(self.version_manifest(version))
        except RuntimeError:
            return False

    def versions(self) -> list[int]:
        if not self.local:
            self.fs.invalidate_cache()
        try:
            names = self.fs.ls(self.path("versions"), detail=False)
        except FileNotFoundError:
            return []
        out = []
        for n in names:
            b = posixpath.basename(n)
            if b.startswith("v") and b.endswith(".json"):
                try:
                    out.append(int(b[1:-5]))
                except ValueError:
                    pass
        return sorted(out)

    def is_empty(self) -> bool:
        try:
            return not self.fs.ls(self.root, detail=False)
        except FileNotFoundError:
            return True

    def wipe(self) -> None:
        for rel in ("data", "versions", "rejects", MANIFEST):
            self.delete(rel, recursive=True)

    def ls_shards(self, version: int) -> list[str]:
        try:
            names = self.fs.ls(self.path(self.version_dir(version)), detail=False)
        except FileNotFoundError:
            return []
        return sorted(posixpath.basename(n) for n in names if n.endswith(".parquet"))
