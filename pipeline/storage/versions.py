"""The committed versions of an output: ``versions/vNNNNN.json``, each created once (the commit point,
:meth:`VersionFiles.commit`), ``manifest.json``, a copy of the newest that never goes back to an older version
(:meth:`VersionFiles.write_manifest`), version numbers never used twice (:meth:`VersionFiles.next_version`), and
the fences a takeover creates so that an owner that lost its lock cannot commit (:meth:`VersionFiles.fence_next_version`,
:func:`is_fenced`). The layout and what counts: :mod:`pipeline.storage.store`, ``docs/storage.md``.

:class:`VersionFiles` is a part of :class:`pipeline.storage.store.CorpusStore`: it uses the store's file I/O
(``read_json``, ``create_json``, ``read_bytes``, ``write_bytes``) and its conditional writes
(:class:`pipeline.storage.conditional.ConditionalWrites`).
"""

from __future__ import annotations

import json
import logging
import posixpath
import time
from typing import Any

from pipeline.storage.errors import CommitConflict, StorageError

log = logging.getLogger("mcprm")

MANIFEST = "manifest.json"
FENCED_FORMAT = "mcprm-fenced-version"  # a version number burnt at a takeover: never a version


def is_fenced(m: Any) -> bool:
    """Whether a version file is a fence (a number a takeover claimed so that the old owner cannot commit it)."""
    return isinstance(m, dict) and m.get("format") == FENCED_FORMAT


def _newer(raw: bytes | None, version: int) -> bool:
    """Whether ``version`` is newer than the manifest copy ``raw`` (True when missing or unreadable)."""
    try:
        cur = json.loads(raw.decode()).get("version") if raw is not None else None
    except (ValueError, UnicodeDecodeError, AttributeError):
        cur = None
    return not isinstance(cur, int) or cur < version


class VersionFiles:
    """The version files and ``manifest.json`` of a corpus (a part of ``CorpusStore``)."""

    def manifest(self) -> dict | None:
        return self.read_json(MANIFEST)

    def commit(self, manifest: dict, fence=None) -> None:
        """Commit a version: ``fence()`` (the lock check: raises LockLost if this run no longer holds the
        output), then create ``versions/vNNNNN.json`` with an exclusive create, the commit point: from here on
        the version counts. Then ``manifest.json`` (a copy) is brought up to it (:meth:`write_manifest`: never
        back to an older version), unless the lock was taken over in between (its successor writes it; readers
        follow the version file meanwhile).

        No check-then-write window is left: an owner that lost its lock after its last check finds its number
        taken by its successor's fence (:meth:`fence_next_version`), and its create fails."""
        from pipeline.storage.lock import LockLost

        v = manifest["version"]
        rel = f"versions/v{v:05d}.json"
        if fence is not None:
            fence()
        try:
            self.create_json(rel, manifest)
        except FileExistsError:
            try:
                other = self.read_json(rel)
            except RuntimeError:
                other = None
            if is_fenced(other):
                raise LockLost(
                    f"this run's lock on {self.url} was taken over by another run, which fenced version {v} "
                    f"({self.uri(rel)}) so that this run cannot commit it. Nothing was committed by this run; the "
                    "output's committed versions are untouched. Make sure only one run writes this output, then "
                    "rerun the same command.") from None
            raise CommitConflict(
                f"{self.uri(rel)} already exists: another run committed version {v}. "
                "Versions are never overwritten; nothing was committed by this run. Rerun the same command.") from None
        if fence is not None:
            try:
                fence()
            except LockLost as e:
                log.warning("committed version %d (%s), but the lock was taken over right after (%s); "
                            "manifest.json is left to the run that took over (readers follow the version file)",
                            v, self.uri(rel), str(e).split(". ")[0])
                return
        self.write_manifest(manifest)

    def write_manifest(self, manifest: dict) -> bool:
        """Replace ``manifest.json`` with ``manifest`` only if that is a newer version than the one it holds (or
        it is missing or unreadable), so that the copy does not go back in time when a writer paused after its
        commit (or a repair) writes late. Returns whether it was written.

        memory:// and S3: a compare-and-swap (:meth:`replace_if`), retried while other writers change it: the
        copy never goes back. A local disk and other object stores: re-read, write if newer, then catch up: a
        writer paused between its re-read and its write may have put back an older copy than a version
        committed meanwhile, and brings it up to the newest committed version itself right after
        (docs/storage.md)."""
        version = manifest["version"]
        if self.conditional_replace:
            data = self._manifest_bytes(manifest)
            for _ in range(100):
                raw, tag = self.read_tagged(MANIFEST)
                if not _newer(raw, version):
                    return False
                if self.replace_if(MANIFEST, data, tag):
                    return True
            raise StorageError.said(f"{self.uri(MANIFEST)} kept changing while version {version} was written to "
                                    "it (100 tries); the version is committed; run `mcprm verify --repair`")
        wrote = self._write_manifest_if_newer(manifest)
        for _ in range(10):  # catch up with versions committed while this writer was paused
            try:
                cur = json.loads(self.read_bytes(MANIFEST).decode()).get("version")
            except (FileNotFoundError, ValueError, UnicodeDecodeError, AttributeError):
                return wrote
            newer = self._newest_version_above(cur if isinstance(cur, int) else 0)
            if newer is None or not self._write_manifest_if_newer(newer):
                return wrote
        return wrote

    @staticmethod
    def _manifest_bytes(manifest: dict) -> bytes:
        return (json.dumps(manifest, indent=2, sort_keys=False, default=str) + "\n").encode()

    def _write_manifest_if_newer(self, manifest: dict) -> bool:
        try:
            raw = self.read_bytes(MANIFEST)
        except FileNotFoundError:
            raw = None
        if not _newer(raw, manifest["version"]):
            return False
        self.write_bytes(MANIFEST, self._manifest_bytes(manifest))
        return True

    def _newest_version_above(self, cur: int) -> dict | None:
        """The newest committed version file above ``cur`` that is a whole version (not a fence), or None."""
        for v in reversed([v for v in self.versions() if v > cur]):
            try:
                m = self.version_manifest(v)
            except RuntimeError:
                continue
            if isinstance(m, dict) and not is_fenced(m) and m.get("version") == v and isinstance(m.get("shards"), list):
                return m
        return None

    def next_version(self) -> int:
        """One above every version number ever used (committed, fenced, or named by manifest.json): a number
        is never used twice."""
        try:
            m = self.manifest()
        except RuntimeError:
            m = None
        cur = m.get("version") if isinstance(m, dict) and isinstance(m.get("version"), int) else 0
        return max([cur] + self.versions()) + 1

    def fence_next_version(self, stale: dict) -> int | None:
        """At a takeover from an owner that may still be alive (called by :class:`OutputLock` before it replaces
        the lock): create the next version file as a fence, so that the old owner, whatever it does from now
        on, can never commit. Returns the fenced number, or None when that number was just committed (by the
        old owner, before this takeover: its commit counts, and it has nothing left to commit)."""
        n = self.next_version()
        rec = {"format": FENCED_FORMAT, "version": n,
               "reason": "the lock was taken over from an owner that may still be running; this number is "
                         "claimed so that it cannot commit. Not a version: readers skip it.",
               "fenced_owner": {k: stale.get(k) for k in ("token", "host", "pid", "instance", "heartbeat")},
               "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        try:
            self.create_json(f"versions/v{n:05d}.json", rec)
        except FileExistsError:
            return None
        log.warning("fenced version %d at %s: the run that held the lock may still be running and can no "
                    "longer commit", n, self.uri(f"versions/v{n:05d}.json"))
        return n

    def version_manifest(self, version: int) -> dict | None:
        return self.read_json(f"versions/v{version:05d}.json")

    def is_fence(self, version: int) -> bool:
        """Whether ``versions/vNNNNN.json`` is a fence (an unreadable file is not: ``verify`` names it)."""
        try:
            return is_fenced(self.version_manifest(version))
        except RuntimeError:
            return False

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
