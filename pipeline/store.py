"""The output corpus on any fsspec URL: versioned shards, an atomic commit point, a lock.

Layout of an output folder::

    OUT/manifest.json                  the commit point: the current version's manifest (config, versions,
                                       counts, the full shard list). Readers start here.
    OUT/versions/v00002.json           every committed version's manifest, immutable
    OUT/data/v00002/part-00000.parquet shards written by version 2 (a refresh adds a new v-folder and
                                       lists old and new shards in its manifest)
    OUT/data/v00003/_plan.json         an uncommitted run's plan (identity + shard contents), for resume
    OUT/rejects/v00002.jsonl           rows rejected by --skip-bad in version 2
    OUT/_lock                          held while a run writes (see :mod:`pipeline.lock`)

Every file is written whole under its final name in one step: on a local disk through a temporary name and
``os.replace``; on object storage with a single PUT, which is atomic there. A shard exists completely or not
at all, so a run killed at any moment leaves nothing half-written, and ``manifest.json`` is replaced last,
so a reader sees the old version or the new one, never a mix.
"""

from __future__ import annotations

import io
import json
import os
import posixpath
import uuid
from typing import Any

MANIFEST = "manifest.json"


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
    def write_bytes(self, rel: str, data: bytes) -> None:
        full = self.path(rel)
        parent = posixpath.dirname(full)
        if self.local:
            os.makedirs(parent, exist_ok=True)
            tmp = f"{full}.tmp-{uuid.uuid4().hex[:8]}"
            try:
                with open(tmp, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, full)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        else:
            self.fs.makedirs(parent, exist_ok=True)
            self.fs.pipe_file(full, data)  # one PUT: atomic on object stores

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

    def write_table(self, rel: str, table) -> None:
        import pyarrow.parquet as pq

        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        self.write_bytes(rel, buf.getvalue())

    def read_table(self, rel: str, columns: list[str] | None = None):
        import pyarrow.parquet as pq

        # use_threads=False: pyarrow's threaded reader on a Python file object can abort the interpreter at
        # exit ("terminate called without an active exception", seen with pyarrow 25 and 26 in ~1 run of 3);
        # shards are small, so one thread costs little.
        with self.fs.open(self.path(rel), "rb") as f:
            return pq.read_table(f, columns=columns, use_threads=False)

    # ---------------------------------------------------------------- manifest
    def manifest(self) -> dict | None:
        return self.read_json(MANIFEST)

    def commit(self, manifest: dict) -> None:
        v = manifest["version"]
        self.write_json(f"versions/v{v:05d}.json", manifest)
        self.write_json(MANIFEST, manifest)

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
