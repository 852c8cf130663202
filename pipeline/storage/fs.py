"""The one place a URL becomes a file system: every module that reads or writes a path or URL (the output
corpus, input files, rejects, a reference set, a prompt template) gets its file system here, never from fsspec
itself.

Credentials and other settings of a store reach it two ways, both passed through unchanged: ``storage_options``
(keyword arguments of the store's fsspec implementation, e.g. ``{"endpoint_url": ..., "key": ...}`` for
``s3://``) given by the caller, and fsspec's own configuration (``FSSPEC_<PROTOCOL>_<KEY>`` environment
variables, ``~/.config/fsspec/*.json``), which fsspec merges under them; the client libraries read their usual
environment too (``AWS_*``, ``GOOGLE_APPLICATION_CREDENTIALS``). Nothing here adds, renames or drops an option, so
whatever works with fsspec for a URL works for mcprm.
"""

from __future__ import annotations

import functools
import inspect
import sys
from typing import Any


def filesystem(url: str, storage_options: dict | None = None) -> tuple[Any, str]:
    """The file system of ``url`` and the path on it (the protocol stripped). Raises what fsspec raises for a
    URL it cannot open (``ValueError`` for an unknown protocol, ``ImportError`` for a missing backend)."""
    from fsspec.core import url_to_fs

    return url_to_fs(url, **(storage_options or {}))


def open_url(url: str, mode: str = "rb", storage_options: dict | None = None, **kwargs):
    """``url`` opened as a file (a context manager); text modes take ``encoding``, ``errors`` and ``newline``,
    ``compression`` names a codec (``"gzip"``, ``"zstd"``) or ``None``."""
    fs, path = filesystem(url, storage_options)
    return fs.open(path, mode, **kwargs)


def exists(url: str, storage_options: dict | None = None) -> bool:
    fs, path = filesystem(url, storage_options)
    return fs.exists(path)


def is_local(fs) -> bool:
    """Whether ``fs`` is the local disk (renames, hard links and ``fsync`` are available)."""
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def is_memory(fs) -> bool:
    """Whether ``fs`` is fsspec's in-process ``memory://`` store."""
    from fsspec.implementations.memory import MemoryFileSystem

    return isinstance(fs, MemoryFileSystem)


def is_s3(fs) -> bool:
    """Whether ``fs`` is S3 (or an S3-compatible store) through s3fs; ``False`` when s3fs is not installed."""
    try:
        from s3fs import S3FileSystem
    except ImportError:
        return False
    return isinstance(fs, S3FileSystem)


def s3_bucket(fs, path: str) -> str | None:
    """The bucket of ``path`` when ``fs`` is an s3fs filesystem (a subclass too), else None. Never imports s3fs:
    a filesystem of s3fs exists only once s3fs is imported."""
    mod = sys.modules.get("s3fs")
    if mod is None or not isinstance(fs, mod.S3FileSystem):
        return None
    return path.lstrip("/").split("/", 1)[0]


def cat_whole(fs, full: str) -> bytes:
    """The whole file ``full``; on S3 in one GET. s3fs's ``cat_file`` first asks for the size (a HEAD) to read a
    large object in concurrent ranged GETs, unless told ``max_concurrency=1``: one request less per read, and the
    bytes are one snapshot of the object whatever its size (ranged GETs of an object being replaced could mix two
    of its versions). Other filesystems, and an s3fs without that option, read as they do."""
    if s3_bucket(fs, full) is not None and _takes_max_concurrency(type(fs)):
        return fs.cat_file(full, max_concurrency=1)
    return fs.cat_file(full)


@functools.cache
def _takes_max_concurrency(cls) -> bool:
    try:
        return "max_concurrency" in inspect.signature(cls._cat_file).parameters
    except (AttributeError, TypeError, ValueError):
        return False
