"""One writer per output: a lock file with a stale-lock rule, a takeover only one contender can win, fencing
tokens that keep an owner that lost the lock from committing or overwriting what its successor recorded.

``OUT/_lock`` holds the owner (a random token, host, pid, the *instance* id of its process namespace, start
time) and a heartbeat refreshed every ``heartbeat_s`` by a background thread. A lock is stale, and may be taken
over, when its heartbeat is older than ``stale_after_s`` (default 10 minutes, ``MCPRM_LOCK_STALE_S``), or at
once when its owner is provably dead: it was written in this very process namespace (same instance id: the
boot id and pid namespace on Linux; host names are never trusted, two containers may share one) and its pid is
gone (a killed run re-run on the same machine).

* **Free output**: the lock is created with an exclusive create (:meth:`CorpusStore.create_bytes`: a hard
  link on local disk, a conditional PUT on object stores; a store without one is refused, see
  :meth:`CorpusStore.require_exclusive_create`), so one creator wins and no reader sees a half-written lock.
* **Stale lock**: the contenders race to exclusively create ``_lock.claim-<id of the stale record>``; the one
  that creates it re-reads ``_lock``, checks it still holds the same stale record, *fences* the old owner
  unless it is provably dead (``fence``: for a corpus, :meth:`CorpusStore.fence_next_version` claims the next
  version number, so the old owner's commit can never land, whatever the timing) and replaces the lock. Every
  other contender fails the create and refuses. A claim whose claimer died before replacing the lock is itself
  stale after ``stale_after_s`` (or at once if its process is provably gone); the next claim is ``...-2``.
* **Fenced shard writes**: :attr:`OutputLock.owner` (part of the token) goes into every shard name this owner
  writes (:class:`pipeline.storage.store.Fenced`), so a shard its successor recorded is never overwritten.
* **Heartbeat, takeover and release never touch another owner's lock**: on local disk the heartbeat updates
  the lock in place through a file descriptor opened and checked first (a successor's lock is another file),
  and the release renames the lock away before it checks whose it is (a successor's is put back with an
  exclusive link). On memory:// and S3 every replace and removal of the lock is conditional on the content
  this run read (:meth:`CorpusStore.replace_if` / :meth:`CorpusStore.delete_if`: ``If-Match`` with the ETag on
  S3). A store without conditional writes falls back to read-check-write, with a warning when the lock is
  taken (docs/storage.md says what that leaves to timing). A heartbeat write error is logged; when no
  heartbeat got through for half of ``stale_after_s`` the run considers the lock lost.
* **Check**: :meth:`check` (after every shard, before and after the version file is created) raises
  :class:`LockLost` when the lock file no longer carries this run's token, or the heartbeat failed. It stops a
  run that lost its lock early; what makes a lost lock harmless is the fence above, not the check.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable

from pipeline.errors import FatalError
from pipeline.processes import pid_alive

log = logging.getLogger("mcprm")

_RECORD_BYTES = 512  # the record is padded to a fixed size so that a heartbeat rewrites it in place
_WARNED: set = set()  # stores already warned about (no conditional writes)


class LockError(FatalError, RuntimeError):
    pass


class LockLost(LockError):
    pass


def _instance_id() -> str:
    """An id of this process namespace: pids of two processes are comparable only when it is the same. Linux:
    the boot id and the pid namespace (two containers with one host name differ here). Elsewhere: a random id
    kept in the temporary folder for this user (one per boot, usually); a new one only makes a dead owner's
    lock wait for its heartbeat to go stale."""
    parts = []
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            parts.append(f.read().strip())
        parts.append(os.readlink("/proc/self/ns/pid"))
    except OSError:
        parts = []
    if not parts:
        path = os.path.join(tempfile.gettempdir(), f"mcprm-instance-{getattr(os, 'getuid', lambda: 0)()}")
        try:
            with open(path) as f:
                parts = [f.read().strip()]
        except OSError:
            parts = []
        if not parts or not parts[0]:
            new = uuid.uuid4().hex
            try:
                with open(path, "x") as f:
                    f.write(new)
                parts = [new]
            except OSError:
                try:
                    with open(path) as f:
                        parts = [f.read().strip() or new]
                except OSError:
                    parts = [new]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


INSTANCE = _instance_id()


def _default_stale_after() -> float:
    try:
        return float(os.environ.get("MCPRM_LOCK_STALE_S") or 600.0)
    except ValueError:
        raise LockError(f"MCPRM_LOCK_STALE_S={os.environ['MCPRM_LOCK_STALE_S']!r} is not a number of seconds; "
                        "unset it (default 600) or set e.g. MCPRM_LOCK_STALE_S=120") from None


class OutputLock:
    """``fence(stale_record)``: called at a takeover from an owner that may still be alive, before the lock is
    replaced (a corpus passes :meth:`CorpusStore.fence_next_version`; see :func:`corpus_lock`)."""

    def __init__(self, store, stale_after_s: float | None = None, heartbeat_s: float = 30.0,
                 fence: Callable[[dict], object] | None = None,
                 unfence: Callable[[object, dict], object] | None = None):
        self.store = store
        self.rel = "_lock"
        self.stale_after_s = _default_stale_after() if stale_after_s is None else stale_after_s
        # at least four heartbeats per stale limit (a short MCPRM_LOCK_STALE_S must not make a live run stale)
        self.heartbeat_s = max(0.05, min(heartbeat_s, self.stale_after_s / 4))
        self.fence = fence
        self.unfence = unfence  # undoes fence(stale) when the takeover loses the race (the owner proved alive)
        self.fenced: object = None  # what fence() returned at this lock's takeover (the fenced version)
        self.token = uuid.uuid4().hex
        self.started = time.time()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._claim: str | None = None
        self._lost: str | None = None
        self._last_ok = time.time()

    # ------------------------------------------------------------ records
    @property
    def owner(self) -> str:
        """This owner's id in the names of the shards it writes (the first 12 hex digits of its token)."""
        return self.token[:12]

    def _record(self) -> dict:
        return {"token": self.token, "host": socket.gethostname(), "pid": os.getpid(), "instance": INSTANCE,
                "started": self.started, "heartbeat": time.time()}

    def _encode(self, rec: dict) -> bytes:
        data = json.dumps(rec).encode()
        return data + b" " * max(0, _RECORD_BYTES - len(data) - 1) + b"\n"

    @staticmethod
    def _dead(rec: dict) -> bool:
        """Whether the owner is provably gone: its record was written in this process namespace (same
        instance id, never just the same host name) and its pid no longer exists."""
        if rec.get("instance") != INSTANCE:
            return False
        try:
            pid = int(rec.get("pid", -1))
        except (TypeError, ValueError):
            return False
        return pid > 0 and not pid_alive(pid)

    def _stale(self, rec: dict) -> bool:
        if self._dead(rec):
            return True
        try:
            hb = float(rec.get("heartbeat", 0) or 0)
        except (TypeError, ValueError):
            hb = 0.0
        return time.time() - hb > self.stale_after_s

    def _read_raw(self, rel: str) -> bytes | None:
        try:
            return self.store.read_bytes(rel)
        except FileNotFoundError:
            return None

    def _parse(self, raw: bytes | None, rel: str) -> dict | None:
        if raw is None:
            return None
        try:
            rec = json.loads(raw.decode())
            if not isinstance(rec, dict):
                raise ValueError
            return rec
        except (ValueError, UnicodeDecodeError):
            # An unreadable lock (a torn write by an old mcprm, a stray file): stale once it stays so.
            time.sleep(0.2)
            again = self._read_raw(rel)
            if again != raw:
                return self._parse(again, rel)
            return {"heartbeat": 0, "token": "corrupt-" + hashlib.sha256(raw).hexdigest()[:16]}

    def _read(self, rel: str | None = None) -> dict | None:
        rel = rel or self.rel
        if not self.store.local:
            self.store.fs.invalidate_cache()
        return self._parse(self._read_raw(rel), rel)

    def _read_tagged(self) -> tuple[dict | None, object]:
        """The lock record and the tag of exactly that content (object stores with conditional writes)."""
        raw, tag = self.store.read_tagged(self.rel)
        return self._parse(raw, self.rel), tag

    def _warn_unconditional(self) -> None:
        if self.store.local or self.store.conditional_replace:
            return
        key = (type(self.store.fs), self.store.root.split("/", 1)[0])
        if key in _WARNED:
            return
        _WARNED.add(key)
        log.warning("%s: this storage (%s) has no conditional writes (If-Match), so this lock's heartbeat and "
                    "release read, check and then write: a run paused for longer than the stale limit exactly "
                    "between the two can overwrite or remove the lock of the run that took over. Commits stay "
                    "fenced either way (docs/storage.md). Use S3 (or a local disk) for a lock that never does.",
                    self.store.uri(self.rel), type(self.store.fs).__name__)

    # ------------------------------------------------------------ acquire
    def acquire(self) -> OutputLock:
        self.store.require_exclusive_create()  # no conditional write: refused (two runs could both win)
        self._warn_unconditional()
        data = self._encode(self._record())
        current = self._read()
        if current is None:
            try:
                self.store.create_bytes(self.rel, data)
            except FileExistsError:
                raise LockError(self._busy_message(self._read() or {})) from None
        elif not self._stale(current):
            raise LockError(self._busy_message(current))
        else:
            self._take_over(current, data)
        self._last_ok = time.time()
        self._thread = threading.Thread(target=self._beat, name="mcprm-lock-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _take_over(self, stale: dict, data: bytes) -> None:
        sid = hashlib.sha256(f"{stale.get('token')}|{stale.get('heartbeat')}".encode()).hexdigest()[:16]
        for n in range(1, 100):
            claim = f"_lock.claim-{sid}" + (f"-{n}" if n > 1 else "")
            try:
                self.store.create_bytes(claim, data)
                break
            except FileExistsError:
                other = self._read(claim)
                if other is None or not self._stale(dict(other, heartbeat=other.get("started", 0))):
                    raise LockError(self._busy_message(self._read() or stale, taking_over=True)) from None
                # that claimer died before finishing the takeover: claim the next generation
        else:  # pragma: no cover
            raise LockError(self._busy_message(stale))
        self._claim = claim
        if self.store.local:
            now, tag = self._read(), None
        else:
            now, tag = self._read_tagged()
        if now is None or now.get("token") != stale.get("token") or now.get("heartbeat") != stale.get("heartbeat"):
            self.store.delete(claim)
            raise LockError(self._busy_message(now or {}, taking_over=True))
        if self.fence is not None and not self._dead(stale):
            # the old owner may still be running: make its commit impossible before the lock changes hands
            self.fenced = self.fence(stale)
        if self.store.local or not self.store.conditional_replace:
            self.store.write_bytes(self.rel, data)
        elif not self.store.replace_if(self.rel, data, tag):  # the stale owner's heartbeat got through meanwhile
            # it is alive and holds the lock: the fence made for it would stop its commit for nothing
            if self.fenced is not None and self.unfence is not None:
                try:
                    self.unfence(self.fenced, stale)
                except Exception as e:  # noqa: BLE001 - its commit then names the fence (and this run)
                    log.warning("could not remove the fence this run made (version %s): %s", self.fenced, e)
                self.fenced = None
            self.store.delete(claim)
            raise LockError(self._busy_message(self._read() or {}, lost_race=True))
        log.warning("took over the stale lock %s (host %s, pid %s, last heartbeat %.0f s ago)",
                    self.store.uri(self.rel), stale.get("host"), stale.get("pid"),
                    time.time() - float(stale.get("heartbeat", 0) or 0))

    def _busy_message(self, rec: dict, taking_over: bool = False, lost_race: bool = False) -> str:
        try:
            age = f"{time.time() - float(rec.get('heartbeat', 0) or 0):.0f} s ago"
        except (TypeError, ValueError):
            age = "unknown"
        extra = (" (another run is taking over its stale lock right now)" if taking_over else
                 " (it looked stale, but its heartbeat got through while this run tried to take it over: it is "
                 "alive, and keeps the lock)" if lost_race else "")
        return (
            f"{self.store.uri(self.rel)} is held by another mcprm run (host {rec.get('host')}, pid {rec.get('pid')}, "
            f"last heartbeat {age}){extra}. Only one run may write an output at a time: wait for it to finish. "
            f"If that run is dead, the lock becomes stale after {self.stale_after_s:.0f} s without heartbeat "
            "(MCPRM_LOCK_STALE_S), and the next run takes it over (never delete the _lock file of a run that may "
            "still be running: see docs/storage.md)."
        )

    # ------------------------------------------------------------ heartbeat and fencing
    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                if not self._beat_once():
                    return
                self._last_ok = time.time()
            except Exception as e:  # noqa: BLE001 - logged, and fatal once the lock could go stale
                silent = time.time() - self._last_ok
                log.warning("could not refresh the lock %s: %s (no heartbeat for %.0f s)",
                            self.store.uri(self.rel), e, silent)
                if silent > self.stale_after_s / 2:
                    self._lost = (f"the lock {self.store.uri(self.rel)} could not be refreshed for {silent:.0f} s "
                                  f"({e}); another run may take it over")
                    return

    def _beat_once(self) -> bool:
        """Refresh the heartbeat if the lock is still ours; False (and the lock marked lost) if not."""
        if self.store.local:
            full = self.store.path(self.rel)
            try:
                fd = os.open(full, os.O_RDWR)
            except FileNotFoundError:
                self._lost = f"the lock {full} was removed"
                return False
            try:
                rec = self._parse(os.pread(fd, 1 << 16, 0), self.rel) or {}
                if rec.get("token") != self.token:
                    self._lost = self._lost_message(rec)
                    return False
                rec["heartbeat"] = time.time()
                data = self._encode(rec)
                os.pwrite(fd, data, 0)  # same length: the file is never seen shorter or half-empty
                os.fsync(fd)
            finally:
                os.close(fd)
            return True
        rec, tag = self._read_tagged()
        rec = rec or {}
        if rec.get("token") != self.token:
            self._lost = self._lost_message(rec)
            return False
        rec["heartbeat"] = time.time()
        if not self.store.conditional_replace:
            self.store.write_bytes(self.rel, self._encode(rec))
            return True
        if not self.store.replace_if(self.rel, self._encode(rec), tag):  # taken over since it was read
            self._lost = self._lost_message(self._read() or {})
            return False
        return True

    def _lost_message(self, rec: dict) -> str:
        if not rec:
            return f"the lock {self.store.uri(self.rel)} was removed"
        return (f"the lock {self.store.uri(self.rel)} was taken over by another run (host {rec.get('host')}, "
                f"pid {rec.get('pid')})")

    def check(self) -> None:
        """Fencing: raise LockLost unless this run still holds the lock (call right before committing)."""
        if self._lost is None:
            rec = self._read() or {}
            if rec.get("token") != self.token:
                self._lost = self._lost_message(rec)
        if self._lost is not None:
            raise LockLost(f"{self._lost}. This run stops without committing; the output's committed versions "
                           "are untouched. Make sure only one run writes this output, then rerun the same command.")

    def still_held(self) -> bool:
        return self._lost is None and (self._read() or {}).get("token") == self.token

    def release(self) -> None:
        """Remove the lock if it is still this run's, never its successor's (see the module's docstring)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            if self.store.local:
                self._release_local()
            elif self.store.conditional_replace:
                rec, tag = self._read_tagged()
                if (rec or {}).get("token") == self.token and not self.store.delete_if(self.rel, tag):
                    log.info("the lock %s changed while it was released: left to its new owner",
                             self.store.uri(self.rel))
            elif (self._read() or {}).get("token") == self.token:
                self.store.delete(self.rel)
            if self._claim is not None:
                self.store.delete(self._claim)
        except OSError as e:  # a lock left behind is stale at once for a re-run in this process namespace
            log.warning("could not remove the lock %s: %s", self.store.uri(self.rel), e)

    def _release_local(self) -> None:
        """Local disk: the lock is renamed to a name of this run's own (atomic: whichever lock is there moves),
        then checked; this run's is removed, another run's (it took over while this one was paused) is put back
        with an exclusive link, which never replaces a lock created meanwhile."""
        if (self._read() or {}).get("token") != self.token:
            return
        fs, full = self.store.fs, self.store.path(self.rel)
        away = self.store.path(f"{self.rel}.released-{self.token[:12]}")
        try:
            fs.mv(full, away)
        except FileNotFoundError:
            return
        raw = self._read_raw(f"{self.rel}.released-{self.token[:12]}")
        rec = self._parse(raw, self.rel) or {}
        if rec.get("token") != self.token:
            try:
                fs.link(away, full)
                log.info("the lock %s changed while it was released: left to its new owner", full)
            except FileExistsError:
                log.warning("the lock %s was taken over while this run released it, and another run has "
                            "created a lock since; the run that took over stops at its next lock check", full)
        self.store.delete(f"{self.rel}.released-{self.token[:12]}")

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def corpus_lock(store, **kw) -> OutputLock:
    """The lock of a corpus output: a takeover from an owner that may still be running fences the next
    version number (:meth:`CorpusStore.fence_next_version`) before the lock changes hands, and removes that
    fence again when the takeover loses the race to the owner's heartbeat (:meth:`CorpusStore.unfence_version`)."""
    return OutputLock(store, fence=store.fence_next_version, unfence=store.unfence_version, **kw)
