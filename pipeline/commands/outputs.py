"""An output folder that is a file is refused before anything is written: ``--output FILE``
otherwise fails deep inside a write ("Not a directory", "File exists") and may leave a staging folder."""

from __future__ import annotations

import os
import posixpath

from pipeline.errors import FatalError


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
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(url)
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
    import fsspec

    check_output_url(url, option)
    try:
        fs, path = fsspec.core.url_to_fs(url)
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
