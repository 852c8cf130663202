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
