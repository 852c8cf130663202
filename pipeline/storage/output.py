"""What a run does to its output folder beyond the corpus itself: a local folder it created and must not leave
behind empty when it is refused, and a storage failure said in words a user can act on."""

from __future__ import annotations

import os

from pipeline.storage.failures import describe_storage_failure
from pipeline.storage.store import CorpusStore, StorageError


def new_local_folder(url: str) -> str | None:
    """The topmost folder of a local output path that does not exist yet (what a run would create), else None."""
    store = CorpusStore(url)
    if not store.local:
        return None  # an object store has no empty folders to leave behind
    path = os.path.abspath(store.root)
    if os.path.lexists(path):
        return None
    while True:
        parent = os.path.dirname(path)
        if parent == path or os.path.lexists(parent):
            return path
        path = parent


def remove_empty_folders(top: str) -> None:
    """Remove ``top`` and the folders below it, bottom up, where each is empty: a run refused before it wrote
    anything leaves no folder it created; anything written (by it or a concurrent run) stays."""
    for d, _subdirs, _files in os.walk(top, topdown=False):
        try:
            os.rmdir(d)  # only an empty folder; atomic, so a file another run writes meanwhile is never lost
        except OSError:
            pass


def storage_message(output: str, e: BaseException) -> BaseException:
    """A storage failure of a run writing ``output`` as one :class:`StorageError` that says what failed, where,
    that nothing was committed, whether an earlier version stays intact, and what to do. A missing or existing
    file (the caller's own condition) and an error that already says what to do are returned as they are."""
    if isinstance(e, (FileNotFoundError, FileExistsError)) and not isinstance(e, StorageError):
        return e
    if isinstance(e, StorageError) and e.message:  # says what is wrong and what to do (e.g. no exclusive create)
        return e
    if isinstance(e, OSError) and e.errno is not None:
        what = e.strerror or str(e) or type(e).__name__
    else:
        what = describe_storage_failure(e)
    try:
        versions = CorpusStore(output).versions()
    except Exception:  # noqa: BLE001 - the storage itself is failing
        versions = []
    where = (e.filename if isinstance(e, OSError) else None) or output
    if what.endswith(str(where)):
        what = what[: -len(str(where))].rstrip()
    state = (f"the previous corpus version is intact (version {max(versions)})" if versions
             else "no corpus version was committed yet")
    at = "" if str(where) == str(output) else f" ({where})"
    msg = (f"storage error on the output {output}: {what}{at}. Nothing was committed by this run; {state}. Fix the "
           "storage problem (credentials, free space, permissions) and rerun the same command to resume.")
    return StorageError.said(msg, e.errno if isinstance(e, OSError) else None)
