"""Conditional writes on the output's storage: a create only if absent (:attr:`ConditionalWrites.exclusive_create`,
:meth:`~ConditionalWrites.require_exclusive_create`), and a replace or delete only if the file is still what was
read (:meth:`~ConditionalWrites.read_tagged`, :meth:`~ConditionalWrites.replace_if`,
:meth:`~ConditionalWrites.delete_if`): the lock (:mod:`pipeline.storage.lock`) and ``manifest.json``
(:meth:`pipeline.storage.store.CorpusStore.write_manifest`) are never replaced by a writer paused between its
read and its write.

Whether a backend really honours a condition is probed once per filesystem class and bucket (an ETag on S3,
one mutex on memory://), never assumed from its class name. :class:`ConditionalWrites` is a part of
:class:`pipeline.storage.store.CorpusStore`: it uses the store's ``fs``, ``root``, ``url``, ``local``,
:meth:`path`, :meth:`uri`, :meth:`create_bytes`, :meth:`read_bytes` and :meth:`delete`.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any

from pipeline.storage.errors import StorageError
from pipeline.storage.fs import cat_whole
from pipeline.storage.fs import is_memory as _is_memory
from pipeline.storage.fs import is_s3 as _is_s3

log = logging.getLogger("mcprm")


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


class ConditionalWrites:
    """Create-if-absent, compare-and-swap replace and delete, probed per backend (a part of ``CorpusStore``)."""

    # ---------------------------------------------------------------- exclusive create
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
                data = cat_whole(self.fs, full)
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
            raise StorageError.while_doing(e, self.uri(rel), "writing") from e
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
            raise StorageError.while_doing(e, self.uri(rel), "removing") from e
        finally:
            self.fs.invalidate_cache(full)
        return True
