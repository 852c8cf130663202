"""The output URL a command writes into: refused before anything is written when it names no folder of its own
(empty, the root of the file system) or is a file (``--output FILE`` otherwise fails deep inside a write, "Not a
directory", "File exists", and may leave a staging folder), and a storage failure while writing it said in words a
user can act on."""

from __future__ import annotations

import os
import posixpath

from pipeline.errors import FatalError
from pipeline.storage.failures import describe_storage_failure
from pipeline.storage.fs import filesystem
from pipeline.storage.store import CorpusStore, StorageError


class OutputIsAFile(FatalError, ValueError):
    """An output folder names a file (or lies inside one)."""


class BadOutput(FatalError, ValueError):
    """An output that names no folder of its own: empty, or the root of the file system."""


def check_output_url(url: str, option: str = "--output") -> None:
    """Refuse an output that is empty (fsspec reads ``''`` as the current folder: files would land beside
    whatever is there) or the root of the local file system (a refresh or ``--overwrite`` lists and removes
    ``data/``, ``versions/`` and ``manifest.json`` there)."""
    if not str(url or "").strip():
        raise BadOutput(f"{option} is empty: pass the folder to write into (a new one is created), e.g. "
                        f"{option} out/corpus")
    try:
        fs, path = filesystem(url)
    except Exception:  # noqa: BLE001 - an unknown protocol: the store's own open says what is wrong
        return
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    if ("file" in protocols or "local" in protocols) and os.path.dirname(os.path.abspath(path)) == os.path.abspath(path):
        raise BadOutput(f"{option} {url} is the root of the file system: pass a folder of its own (a new one is "
                        f"created), e.g. {option} /data/corpus")


def check_output_folder(url: str, option: str = "--output") -> None:
    """Raise :class:`OutputIsAFile` if ``url`` is a file, or (local disk) lies below a file; else nothing.

    Remote stores (s3://, gs://) are checked for the path itself only: their "folders" are name prefixes. An
    empty output or the root of the file system is refused first (:func:`check_output_url`)."""
    check_output_url(url, option)
    try:
        fs, path = filesystem(url)
    except Exception:  # noqa: BLE001 - an unknown protocol: the store's own open says what is wrong
        return
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    local = "file" in protocols or "local" in protocols
    p = path.rstrip("/") or path
    while True:
        try:
            if fs.isfile(p):
                break
            if not local or fs.exists(p):  # an existing folder (or a remote prefix): fine
                return
        except Exception:  # noqa: BLE001 - credentials, network: the write itself names the problem
            return
        parent = posixpath.dirname(p)
        if not parent or parent == p:
            return
        p = parent
    if p == (path.rstrip("/") or path):
        raise OutputIsAFile(f"{url} is a file, not a folder: {option} names the folder to write into. Pass a "
                            "folder path (a new one is created), or move the file away")
    shown = url.rstrip("/")  # the file as the user spelled it: as many components up as p is above path
    for _ in range((path.rstrip("/") or path).count("/") - p.count("/")):
        shown = posixpath.dirname(shown) or p
    raise OutputIsAFile(f"{shown} is a file, not a folder, so {option} {url} cannot be created inside it. Pass a "
                        "folder path that is not inside a file")


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
