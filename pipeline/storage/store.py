"""The output corpus on any fsspec URL: versioned shards, an atomic commit point, a lock.

Layout of an output folder::

    OUT/manifest.json                  the commit point: the current version's manifest (config, versions,
                                       counts, the full shard list). Readers start here.
    OUT/versions/v00002.json           every committed version's manifest, immutable
    OUT/data/v00002/part-00000.parquet shards written by version 2 (a refresh adds a new v-folder and
                                       lists old and new shards in its manifest)
    OUT/data/v00003/_plan.json         an uncommitted run's plan (identity; per shard its staged file, rows and
                                       key digest), for resume
    OUT/data/v00003/_staged/*.parquet  an uncommitted run's input, cut into its shards (pipeline.input.staging)
    OUT/rejects/v00002.jsonl           rows rejected by --skip-bad in version 2
    OUT/_lock                          held while a run writes (see :mod:`pipeline.storage.lock`)

Every file is written whole under its final name in one step: on a local disk through a temporary name and
``os.replace``; on object storage with a single PUT, which is atomic there. A shard exists completely or not
at all, so a run killed at any moment leaves nothing half-written, and ``manifest.json`` is replaced last,
so a reader sees the old version or the new one, never a mix.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import posixpath
from typing import Any

from pipeline.errors import FatalError
from pipeline.faults import fault_point
from pipeline.storage.atomic import AtomicFile

MANIFEST = "manifest.json"


class StorageError(FatalError, OSError):
    """A write or read of the output failed (disk full, read-only, permission): the message names the file."""


# Packages whose exceptions are failures of the storage itself (credentials, permissions, a missing bucket, the
# network), whatever fsspec backend raised them.
_STORAGE_PACKAGES = ("botocore", "aiobotocore", "boto3", "s3fs", "gcsfs", "google", "adlfs", "azure",
                     "huggingface_hub", "fsspec", "aiohttp", "requests", "urllib3")


def is_storage_failure(e: BaseException) -> bool:
    """Whether ``e`` is a failure of the storage (an OSError, or an error of an fsspec backend's client
    library such as botocore's ``NoCredentialsError``) rather than of mcprm's own code."""
    if isinstance(e, OSError):
        return True
    return any((type(c).__module__ or "").split(".")[0] in _STORAGE_PACKAGES for c in _chain(e))


def _chain(e: BaseException):
    seen = 0
    while e is not None and seen < 8:
        yield e
        e = e.__cause__ or e.__context__
        seen += 1


def describe_storage_failure(e: BaseException) -> str:
    """What went wrong with the storage, in words, with what to do for the common cases."""
    names = [type(c).__name__ for c in _chain(e)]
    text = " ".join(str(c) for c in _chain(e))
    low = text.lower()
    if any(n in ("NoCredentialsError", "PartialCredentialsError", "DefaultCredentialsError", "ProfileNotFound")
           for n in names) \
            or "unable to locate credentials" in low:
        return ("no credentials for this storage (" + (str(e) or names[0]) + "); set them up first, e.g. for S3 "
                "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or AWS_PROFILE, for GCS GOOGLE_APPLICATION_CREDENTIALS")
    if "NoSuchBucket" in text or "bucket does not exist" in low or "specified bucket does not exist" in low:
        return f"the bucket does not exist ({e})"
    if isinstance(e, PermissionError):
        return "permission denied"
    if "AccessDenied" in text or "Forbidden" in text or "403" in text:
        return f"permission denied ({e})"
    what = getattr(e, "strerror", None) or str(e)
    return f"{type(e).__name__}: {what}" if what else type(e).__name__


class ShardError(FatalError, RuntimeError):
    """A shard that is missing, truncated, corrupt or not what the manifest says; the message names the file."""


def digest(data: bytes) -> dict:
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def sidecar_rel(shard_rel: str) -> str:
    """Where a shard's checksum is written before the shard itself (``part-00000.sum.json``)."""
    return shard_rel[: -len(".parquet")] + ".sum.json" if shard_rel.endswith(".parquet") else shard_rel + ".sum.json"


def _join(*parts: str) -> str:
    return posixpath.join(*parts)


class CorpusStore:
    def __init__(self, url: str, storage_options: dict | None = None):
        import fsspec

        self.url = url
        self.fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
        self.root = root.rstrip("/") or "/"
        self.local = "file" in (self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,))

    @classmethod
    def for_file(cls, url: str) -> tuple[CorpusStore, str]:
        """A store rooted at the folder of the file ``url``, and the file's name (for atomic single files)."""
        import fsspec

        fs, path = fsspec.core.url_to_fs(url)
        self = cls.__new__(cls)
        self.url = url
        self.fs = fs
        self.root = posixpath.dirname(path) or "."
        self.local = "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,))
        return self, posixpath.basename(path)

    # ---------------------------------------------------------------- paths
    def path(self, *parts: str) -> str:
        return _join(self.root, *parts)

    def version_dir(self, version: int) -> str:
        return f"data/v{version:05d}"

    def shard_rel(self, version: int, shard: int) -> str:
        return f"{self.version_dir(version)}/part-{shard:05d}.parquet"

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

    def write_bytes(self, rel: str, data: bytes) -> None:
        full = self.path(rel)
        parent = posixpath.dirname(full)
        try:
            if self.local:
                af = self._write_tmp(full, data)
                try:
                    fault_point("mid-write", rel)
                except BaseException:
                    af.discard()
                    raise
                af.publish()
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
        """Whether :meth:`create_bytes` is a real create-if-absent on this backend (local disks; fsspec
        backends that implement mode ``"xb"`` as a conditional write: s3fs with ``If-None-Match``, memory)."""
        if self.local:
            return True
        return type(self.fs).__name__ in ("S3FileSystem", "MemoryFileSystem") or getattr(self, "_xb_ok", False)

    def create_bytes(self, rel: str, data: bytes) -> None:
        """Write ``rel`` only if it does not exist (FileExistsError otherwise), whole or not at all.

        Local disk: a temporary file hard-linked to the final name (``link`` fails if the name exists, so
        exactly one of many concurrent creators wins, and nobody ever sees a partial file). Object stores: an
        exclusive (``"xb"``) open, a conditional PUT where the fsspec backend supports it; where it does not,
        an exists check then a PUT (not atomic: see README, "Refreshing a corpus")."""
        full = self.path(rel)
        try:
            if self.local:
                self._write_tmp(full, data).publish(exclusive=True)
                return
            self.fs.makedirs(posixpath.dirname(full), exist_ok=True)
            try:
                with self.fs.open(full, "xb") as f:
                    f.write(data)
                self._xb_ok = True
            except (ValueError, NotImplementedError, TypeError):  # this backend has no exclusive create
                self.fs.invalidate_cache()
                if self.fs.exists(full):
                    raise FileExistsError(full) from None
                self.fs.pipe_file(full, data)
        except (FileExistsError, StorageError):
            raise
        except OSError as e:
            raise self._storage_error(e, rel, "writing") from e

    def create_json(self, rel: str, obj: Any) -> None:
        self.create_bytes(rel, (json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n").encode())

    def read_bytes(self, rel: str) -> bytes:
        with self.fs.open(self.path(rel), "rb") as f:
            return f.read()

    def size(self, rel: str) -> int | None:
        """The file's size in bytes, or None if it does not exist."""
        full = self.path(rel)
        try:
            if self.local:
                return os.path.getsize(full)
            return int(self.fs.info(full)["size"])
        except FileNotFoundError:
            return None

    def write_json(self, rel: str, obj: Any) -> None:
        self.write_bytes(rel, (json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n").encode())

    def read_json(self, rel: str) -> Any | None:
        full = self.path(rel)
        try:
            with self.fs.open(full, "rb") as f:
                return json.loads(f.read().decode())
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

    def write_table(self, rel: str, table) -> dict:
        """Write a shard: its checksum sidecar first, then the shard (both atomically). Returns
        ``{"bytes", "sha256"}``. A shard without a sidecar, or that does not match it, is never kept."""
        import pyarrow.parquet as pq

        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        data = buf.getvalue()
        d = digest(data)
        self.write_json(sidecar_rel(rel), dict(d, rows=table.num_rows))
        fault_point("sidecar-written", rel)
        self.write_bytes(rel, data)
        fault_point("shard-written", rel)
        return d

    def read_table(self, rel: str, columns: list[str] | None = None, expect: dict | None = None):
        """Read a shard. With ``expect`` (a manifest entry with ``bytes``/``sha256``) the whole file is read
        and checked first. Any failure is a :class:`ShardError` naming the file, never a bare ArrowInvalid."""
        import pyarrow.parquet as pq

        if expect is not None and ("sha256" in expect or "bytes" in expect):
            from pipeline.storage.integrity import load_shard

            table = load_shard(self, rel, expect)
            return table.select(columns) if columns else table
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
        """Commit a version: create ``versions/vNNNNN.json`` (never overwriting one: versions are immutable),
        call ``fence()`` (the lock check: raises if this run no longer holds the output), then replace
        ``manifest.json``, the commit point."""
        v = manifest["version"]
        if fence is not None:
            fence()
        try:
            self.create_json(f"versions/v{v:05d}.json", manifest)
        except FileExistsError:
            raise RuntimeError(
                f"{self.uri(f'versions/v{v:05d}.json')} already exists: another run committed version {v}. "
                "Versions are never overwritten; nothing was committed by this run. Rerun the same command.") from None
        fault_point("version-written", MANIFEST)
        if fence is not None:
            fence()
        self.write_json(MANIFEST, manifest)
        fault_point("manifest-written", MANIFEST)

    def version_manifest(self, version: int) -> dict | None:
        return self.read_json(f"versions/v{version:05d}.json")

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
