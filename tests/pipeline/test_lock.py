"""The output lock: exclusive, stale after a dead owner or an old heartbeat, also on non-local storage."""

from __future__ import annotations

import json
import socket
import time

import pytest

from pipeline.lock import LockError, OutputLock
from pipeline.store import CorpusStore


def test_second_lock_refused_then_free_after_release(tmp_path):
    store = CorpusStore(str(tmp_path))
    a = OutputLock(store).acquire()
    with pytest.raises(LockError, match="held by another mcprm run"):
        OutputLock(store).acquire()
    a.release()
    OutputLock(store).acquire().release()
    assert not (tmp_path / "_lock").exists()


def test_lock_of_dead_process_on_this_host_is_stale(tmp_path):
    store = CorpusStore(str(tmp_path))
    (tmp_path / "_lock").write_text(json.dumps({"token": "x", "host": socket.gethostname(), "pid": 999999,
                                               "heartbeat": time.time()}))
    OutputLock(store).acquire().release()


def test_other_host_fresh_refused_old_heartbeat_taken_over(tmp_path):
    store = CorpusStore(str(tmp_path))
    (tmp_path / "_lock").write_text(json.dumps({"token": "x", "host": "elsewhere", "pid": 1,
                                               "heartbeat": time.time()}))
    with pytest.raises(LockError, match="elsewhere"):
        OutputLock(store).acquire()
    (tmp_path / "_lock").write_text(json.dumps({"token": "x", "host": "elsewhere", "pid": 1,
                                               "heartbeat": time.time() - 3600}))
    lk = OutputLock(store, stale_after_s=600).acquire()
    assert json.loads((tmp_path / "_lock").read_text())["token"] == lk.token
    lk.release()


def test_object_store_style_lock(tmp_path):
    store = CorpusStore("memory://lock-test/out")
    a = OutputLock(store, settle_s=0.01).acquire()
    with pytest.raises(LockError):
        OutputLock(store, settle_s=0.01).acquire()
    a.release()
    OutputLock(store, settle_s=0.01).acquire().release()


def test_heartbeat_refreshes(tmp_path):
    store = CorpusStore(str(tmp_path))
    lk = OutputLock(store, heartbeat_s=0.05).acquire()
    first = json.loads((tmp_path / "_lock").read_text())["heartbeat"]
    time.sleep(0.3)
    assert json.loads((tmp_path / "_lock").read_text())["heartbeat"] > first
    lk.release()
