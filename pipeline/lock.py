"""One writer per output: a lock file that also works on object storage, with a stale-lock rule.

``OUT/_lock`` holds the owner (a random token, host, pid, start time) and a heartbeat refreshed every
``heartbeat_s`` by a background thread. A lock is stale, and may be taken over, when its heartbeat is older
than ``stale_after_s`` (default 10 minutes), or at once when it was taken on this host by a process that no
longer exists (a killed run re-run on the same machine). Local disks create the file with ``O_EXCL``; object
stores have no portable exclusive create, so the lock is written, then read back after a settle delay: the
writer whose token is there owns it, the other refuses (last writer wins on S3, which is consistent).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid


class LockError(RuntimeError):
    pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class OutputLock:
    def __init__(self, store, stale_after_s: float = 600.0, heartbeat_s: float = 30.0, settle_s: float = 0.5):
        self.store = store
        self.rel = "_lock"
        self.stale_after_s = stale_after_s
        self.heartbeat_s = heartbeat_s
        self.settle_s = settle_s
        self.token = uuid.uuid4().hex
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _record(self) -> dict:
        return {"token": self.token, "host": socket.gethostname(), "pid": os.getpid(),
                "started": time.time(), "heartbeat": time.time()}

    def _stale(self, rec: dict) -> bool:
        if rec.get("host") == socket.gethostname() and not _pid_alive(int(rec.get("pid", -1))):
            return True
        return time.time() - float(rec.get("heartbeat", 0)) > self.stale_after_s

    def _read(self) -> dict | None:
        try:
            return self.store.read_json(self.rel)
        except RuntimeError:  # corrupt lock file: treat as stale
            return {"heartbeat": 0}

    def acquire(self) -> OutputLock:
        rec = self._record()
        data = json.dumps(rec).encode()
        current = self._read()
        if current is not None and not self._stale(current):
            raise LockError(self._busy_message(current))
        if self.store.local:
            full = self.store.path(self.rel)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            if current is not None:  # stale: remove, then race for O_EXCL like everyone else
                try:
                    os.unlink(full)
                except FileNotFoundError:
                    pass
            try:
                fd = os.open(full, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                raise LockError(self._busy_message(self._read() or {})) from None
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        else:
            self.store.write_bytes(self.rel, data)
            time.sleep(self.settle_s)
            back = self._read() or {}
            if back.get("token") != self.token:
                raise LockError(self._busy_message(back))
        self._thread = threading.Thread(target=self._beat, name="mcprm-lock-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _busy_message(self, rec: dict) -> str:
        age = time.time() - float(rec.get("heartbeat", 0) or 0)
        return (
            f"{self.store.uri(self.rel)} is held by another mcprm run (host {rec.get('host')}, pid {rec.get('pid')}, "
            f"last heartbeat {age:.0f} s ago). Only one run may write an output at a time: wait for it to finish. "
            f"If that run is dead, the lock becomes stale after {self.stale_after_s:.0f} s without heartbeat "
            "(or delete the _lock file yourself)."
        )

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            rec = self._read() or {}
            if rec.get("token") != self.token:
                return  # taken over (we were considered stale); the commit step re-checks
            rec["heartbeat"] = time.time()
            try:
                self.store.write_bytes(self.rel, json.dumps(rec).encode())
            except OSError:
                pass

    def still_held(self) -> bool:
        return (self._read() or {}).get("token") == self.token

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.still_held():
            self.store.delete(self.rel)

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
