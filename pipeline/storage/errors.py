"""The storage's errors: a failed read or write of the output (:class:`StorageError`), a version committed by
another run (:class:`CommitConflict`), a damaged shard (:class:`ShardError`). Each message names the file."""

from __future__ import annotations

from pipeline.errors import FatalError


class StorageError(FatalError, OSError):
    """A write or read of the output failed (disk full, read-only, permission): the message names the file.
    ``message``: where set (:meth:`said`), the whole story — what failed, where, what to do — printed as is."""

    message: str | None = None

    @classmethod
    def said(cls, message: str, errno: int | None = None) -> StorageError:
        err = cls(errno, message) if errno is not None else cls(message)
        err.message = message
        return err

    @classmethod
    def while_doing(cls, e: OSError, uri: str, doing: str) -> StorageError:
        """``e`` (an OSError of the filesystem) as a StorageError naming the file: "<what> while <doing> <uri>"."""
        what = e.strerror or str(e) or type(e).__name__
        return cls(e.errno, f"{what} while {doing} {uri}", uri)


class CommitConflict(FatalError, RuntimeError):
    """The version this run was to commit exists already (only when two runs wrote without the lock, e.g. after
    its file was deleted by hand: a takeover never leads here)."""


class ShardError(FatalError, RuntimeError):
    """A shard that is missing, truncated, corrupt or not what the manifest says; the message names the file."""
