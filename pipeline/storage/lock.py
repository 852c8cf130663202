"""One writer per output: a lock file with a stale-lock rule, a takeover only one contender can win, and a
fencing check before every commit.

``OUT/_lock`` holds the owner (a random token, host, pid, start time) and a heartbeat refreshed every
``heartbeat_s`` by a background thread. A lock is stale, and may be taken over, when its heartbeat is older
than ``stale_after_s`` (default 10 minutes), or at once when it was taken on this host by a process that no
longer exists (a killed run re-run on the same machine).

* **Free output**: the lock is created with an exclusive create (:meth:`CorpusStore.create_bytes`: a hard
  link on local disk, a conditional PUT on object stores that support it), so one creator wins and no
  reader ever sees a half-written lock.
* **Stale lock**: the contenders race to exclusively create ``_lock.claim-<id of the stale record>``; the one
  that creates it re-reads ``_lock``, checks it still holds the same stale record and replaces it. Every other
  contender fails the create and refuses. A claim whose claimer died before replacing the lock is itself
  stale after ``stale_after_s`` (or at once if its process is gone on this host); the next claim is
  ``...-2``, and so on.
* **Heartbeat**: on local disk the lock is updated in place through a file descriptor opened and checked
  first, so a run that was taken over can never overwrite its successor's lock. A heartbeat write error is
  logged; when no heartbeat got through for half of ``stale_after_s`` the run considers the lock lost.
* **Fencing**: :meth:`check` (called after every shard and right before the manifest is replaced) raises
  :class:`LockLost` when the lock file no longer carries this run's token, or the heartbeat failed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import threading
import time
import uuid

from pipeline.errors import FatalError

log = logging.getLogger("mcprm")

_RECORD_BYTES = 512  # the record is padded to a fixed size so that a heartbeat rewrites it in place


class LockError(FatalError, RuntimeError):
    pass


class LockLost(LockError):
    pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False
    return True


class OutputLock:
    def __init__(self, store, stale_after_s: float = 600.0, heartbeat_s: float = 30.0, settle_s: float = 0.5):
        self.store = store
        self.rel = "_lock"
        self.stale_after_s = stale_after_s
        self.heartbeat_s = heartbeat_s
        self.settle_s = settle_s
        self.token = uuid.uuid4().hex
        self.started = time.time()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._claim: str | None = None
        self._lost: str | None = None
        self._last_ok = time.time()

    # ------------------------------------------------------------ records
    def _record(self) -> dict:
        return {"token": self.token, "host": socket.gethostname(), "pid": os.getpid(),
                "started": self.started, "heartbeat": time.time()}

    def _encode(self, rec: dict) -> bytes:
        data = json.dumps(rec).encode()
        return data + b" " * max(0, _RECORD_BYTES - len(data) - 1) + b"\n"

    def _stale(self, rec: dict) -> bool:
        try:
            pid = int(rec.get("pid", -1))
        except (TypeError, ValueError):
            pid = -1
        if rec.get("host") == socket.gethostname() and not _pid_alive(pid):
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

    # ------------------------------------------------------------ acquire
    def acquire(self) -> OutputLock:
        data = self._encode(self._record())
        current = self._read()
        if current is None:
            try:
                self.store.create_bytes(self.rel, data)
            except FileExistsError:
                raise LockError(self._busy_message(self._read() or {})) from None
            if not self.store.exclusive_create:  # no conditional write: read back after a settle delay
                time.sleep(self.settle_s)
                back = self._read() or {}
                if back.get("token") != self.token:
                    raise LockError(self._busy_message(back))
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
        now = self._read()
        if now is None or now.get("token") != stale.get("token") or now.get("heartbeat") != stale.get("heartbeat"):
            self.store.delete(claim)
            raise LockError(self._busy_message(now or {}, taking_over=True))
        self.store.write_bytes(self.rel, data)
        if not self.store.exclusive_create:
            time.sleep(self.settle_s)
            back = self._read() or {}
            if back.get("token") != self.token:
                raise LockError(self._busy_message(back))
        log.warning("took over the stale lock %s (host %s, pid %s, last heartbeat %.0f s ago)",
                    self.store.uri(self.rel), stale.get("host"), stale.get("pid"),
                    time.time() - float(stale.get("heartbeat", 0) or 0))

    def _busy_message(self, rec: dict, taking_over: bool = False) -> str:
        try:
            age = f"{time.time() - float(rec.get('heartbeat', 0) or 0):.0f} s ago"
        except (TypeError, ValueError):
            age = "unknown"
        extra = " (another run is taking over its stale lock right now)" if taking_over else ""
        return (
            f"{self.store.uri(self.rel)} is held by another mcprm run (host {rec.get('host')}, pid {rec.get('pid')}, "
            f"last heartbeat {age}){extra}. Only one run may write an output at a time: wait for it to finish. "
            f"If that run is dead, the lock becomes stale after {self.stale_after_s:.0f} s without heartbeat "
            "(or delete the _lock file yourself)."
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
        rec = self._read() or {}
        if rec.get("token") != self.token:
            self._lost = self._lost_message(rec)
            return False
        rec["heartbeat"] = time.time()
        self.store.write_bytes(self.rel, self._encode(rec))
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
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            if (self._read() or {}).get("token") == self.token:
                self.store.delete(self.rel)
            if self._claim is not None:
                self.store.delete(self._claim)
        except OSError as e:  # a lock left behind is stale at once for a re-run on this host
            log.warning("could not remove the lock %s: %s", self.store.uri(self.rel), e)

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
