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

import contextlib
import json
import logging
import os
import posixpath
import time
from typing import Any

from pipeline.storage.errors import CommitConflict, StorageError

log = logging.getLogger("mcprm")

MANIFEST = "manifest.json"
MANIFEST_LOCK_WAIT_S = 30.0
FENCE_SETTLE_S = 10.0  # the longest wait for a takeover that lost the race to remove its fence  # local disk: the longest wait for another writer of manifest.json (then left as it is)
FENCED_FORMAT = "mcprm-fenced-version"  # a version number burnt at a takeover: never a version


def is_fenced(m: Any) -> bool:
    """Whether a version file is a fence (a number a takeover claimed so that the old owner cannot commit it)."""
    return isinstance(m, dict) and m.get("format") == FENCED_FORMAT


def read_version(store, v: int) -> dict | None:
    """Version ``v``'s manifest, or None when it is missing, unreadable or a fence (never a version)."""
    try:
        m = store.version_manifest(v)
    except RuntimeError:
        return None
    if is_fenced(m) or not isinstance(m, dict) or m.get("version") != v or not isinstance(m.get("shards"), list):
        return None
    return m


def _newer(raw: bytes | None, version: int) -> bool:
    """Whether ``version`` is newer than the manifest copy ``raw`` (True when missing or unreadable)."""
    try:
        cur = json.loads(raw.decode()).get("version") if raw is not None else None
    except (ValueError, UnicodeDecodeError, AttributeError):
        cur = None
    return not isinstance(cur, int) or cur < version


def _still_held(fence) -> bool:
    from pipeline.storage.lock import LockLost

    try:
        fence()
    except LockLost:
        return False
    return True


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
            if is_fenced(other) and fence is not None and self._fence_settles(rel, fence):
                return self.commit(manifest, fence)
            if is_fenced(other) and fence is not None and _still_held(fence):
                raise LockLost(
                    f"version {v} of {self.url} was fenced ({self.uri(rel)}) by a run that found this run's lock "
                    "stale (no heartbeat within the stale limit, MCPRM_LOCK_STALE_S) but did not take it over; this "
                    "run still holds the lock. Nothing was committed by this run; the output's committed versions "
                    "are untouched. Rerun the same command (its finished shards are resumed); if this machine was "
                    "paused or overloaded, raise MCPRM_LOCK_STALE_S.") from None
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

    def _fence_settles(self, rel: str, fence) -> bool:
        """A fence at this run's number while the lock check still passes: a takeover that found this run's
        heartbeat stale and lost the race to it removes its fence again (:meth:`unfence_version`). Waits at most
        :data:`FENCE_SETTLE_S` for that; True when the fence went (the commit is retried), False when the lock
        was lost meanwhile or the fence stays (the commit is refused, naming it)."""
        from pipeline.storage.lock import LockLost

        deadline = time.monotonic() + FENCE_SETTLE_S
        while True:
            try:
                fence()
            except LockLost:
                return False
            try:
                still = is_fenced(self.read_json(rel))
            except RuntimeError:
                still = True
            if not still:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)

    def write_manifest(self, manifest: dict) -> bool:
        """Replace ``manifest.json`` with ``manifest`` only if that is a newer version than the one it holds (or
        it is missing or unreadable), so that the copy does not go back in time when a writer paused after its
        commit (or a repair) writes late. Returns whether it was written.

        memory:// and S3: a compare-and-swap (:meth:`replace_if`), retried while other writers change it: the
        copy never goes back. A local disk: re-read, write if newer and catch up, all under the folder's
        ``flock`` (:meth:`_manifest_writer`): never goes back either. Other object stores: re-read, write if
        newer, then catch up: a writer paused between its re-read and its write may put back an older copy than
        a version committed meanwhile, and brings it up to the newest committed version itself right after
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
        with self._manifest_writer() as held:
            if not held:
                log.warning("%s: another writer has held it for %g s (a process paused while it writes it); left "
                            "as it is, behind version %d, which is committed (readers follow versions/; the next "
                            "`mcprm label` or `mcprm verify --repair` brings it up)", self.uri(MANIFEST),
                            MANIFEST_LOCK_WAIT_S, version)
                return False
            wrote = self._write_manifest_if_newer(manifest)
            for _ in range(10):  # catch up with versions committed while another writer held it
                try:
                    cur = json.loads(self.read_bytes(MANIFEST).decode()).get("version")
                except (FileNotFoundError, ValueError, UnicodeDecodeError, AttributeError):
                    return wrote
                newer = self._newest_version_above(cur if isinstance(cur, int) else 0)
                if newer is None or not self._write_manifest_if_newer(newer):
                    return wrote
            return wrote

    @contextlib.contextmanager
    def _manifest_writer(self):
        """Local disk: the output folder's ``flock``, so that the re-read, the compare and the rename of
        ``manifest.json`` are one step for every writer on this machine (a writer paused or killed half-way can
        never put an older copy back over a newer one: nobody else writes meanwhile, and a killed writer's lock is
        released by the kernel). Waited for at most :data:`MANIFEST_LOCK_WAIT_S`; yields False when not got. Other
        stores, or a folder that cannot be locked (some network file systems): True, without a lock (their
        re-read, write and catch-up, docs/storage.md)."""
        if not self.local:
            yield True
            return
        import fcntl

        try:
            fd = os.open(self.root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            yield True
            return
        try:
            deadline = time.monotonic() + MANIFEST_LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    got = True
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        got = False
                        break
                    time.sleep(0.05)
                except OSError:  # no flock on this file system
                    yield True
                    return
            yield got
        finally:
            os.close(fd)  # (releases the lock)

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

    def unfence_version(self, n: int, stale: dict) -> bool:
        """Remove fence ``n``, made at a takeover from the owner ``stale`` that lost the race (the owner's
        heartbeat got through: it is alive and still holds the lock), so that its commit is not refused for a
        takeover that never happened. Only that very fence (the same stale record), and conditionally on its
        content where the store can (``If-Match`` on S3): a version file is never removed. Returns whether it
        was removed."""
        rel = f"versions/v{n:05d}.json"
        raw, tag = self.read_tagged(rel)
        try:
            rec = json.loads(raw.decode()) if raw is not None else None
        except (ValueError, UnicodeDecodeError):
            return False
        owner = (rec or {}).get("fenced_owner") or {}
        if not is_fenced(rec) or owner.get("token") != stale.get("token") or owner.get("heartbeat") != stale.get(
                "heartbeat"):
            return False
        if self.conditional_replace:
            gone = self.delete_if(rel, tag)
        else:  # local disk: the fence's content was checked just now, and fences are never rewritten
            self.delete(rel)
            gone = True
        if gone:
            log.warning("removed fence %d (%s): the run that held the lock is alive (its heartbeat got through) "
                        "and keeps it", n, self.uri(rel))
        return gone

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
