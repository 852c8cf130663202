"""The one atomic writer of local files: written under a temporary name beside the target, flushed to disk, then
published whole by a rename (or a hard link, to create a file only if it does not exist yet), or removed. After
the rename or link the folder itself is flushed (:func:`fsync_dir`): without it a power loss can lose a rename
that was already reported done.

Used for shards and manifests on local disk (:class:`pipeline.storage.store.CorpusStore`), the rejects file
(:class:`pipeline.input.RejectsWriter`), ``mcprm grade --output`` and the Ray executor's pid file. Object stores
need none of this: one PUT is already whole or absent."""

from __future__ import annotations

import os
import uuid


def fsync_dir(folder: str) -> None:
    """Flush a folder's entries to disk (a rename, link or unlink in it survives a power loss). Where the
    platform cannot open a folder (Windows), the rename is left to the file system's own ordering."""
    try:
        fd = os.open(folder or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems (e.g. certain network mounts) refuse fsync on a folder
        pass
    finally:
        os.close(fd)


class AtomicFile:
    """A local file that readers see whole or not at all.

    Write with :meth:`write`, then :meth:`publish` (rename over ``path``; ``exclusive=True``: hard link, so
    ``FileExistsError`` if ``path`` exists and exactly one of many creators wins) or :meth:`discard`. As a
    context manager it publishes on success and discards on an error. The temporary name is
    ``{path}.tmp-{pid}-{random}`` (``mcprm prune`` removes leftovers of killed runs)."""

    def __init__(self, path: str, text: bool = False, fsync: bool = True):
        self.path = path
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        self.tmp = f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._fsync = fsync
        self._f = open(self.tmp, "w", encoding="utf-8") if text else open(self.tmp, "wb")  # noqa: SIM115

    def write(self, data) -> int:
        return self._f.write(data)

    def finish(self) -> None:
        """Flush and close the temporary file (to disk with ``fsync``); idempotent."""
        if self._f is None:
            return
        f, self._f = self._f, None
        try:
            f.flush()
            if self._fsync:
                os.fsync(f.fileno())
        finally:
            f.close()

    def publish(self, exclusive: bool = False) -> None:
        try:
            self.finish()
            if exclusive:
                os.link(self.tmp, self.path)
            else:
                os.replace(self.tmp, self.path)
                if self._fsync:
                    fsync_dir(os.path.dirname(self.path))
                return
        except BaseException:
            self.discard()
            raise
        self.discard()  # linked: the temporary name goes
        if self._fsync:
            fsync_dir(os.path.dirname(self.path))

    def discard(self) -> None:
        if self._f is not None:
            f, self._f = self._f, None
            f.close()
        try:
            os.unlink(self.tmp)
        except OSError:
            pass

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.publish()
        else:
            self.discard()
