"""The output lock: exclusive, stale after a dead owner or an old heartbeat, also on non-local storage."""

from __future__ import annotations

import json
import socket
import time

import pytest

from pipeline.storage.lock import LockError, OutputLock
from pipeline.storage.store import CorpusStore


def test_second_lock_refused_then_free_after_release(tmp_path):
    store = CorpusStore(str(tmp_path))
    a = OutputLock(store).acquire()
    with pytest.raises(LockError, match="held by another mcprm run"):
        OutputLock(store).acquire()
    a.release()
    OutputLock(store).acquire().release()
    assert not (tmp_path / "_lock").exists()


def test_lock_of_dead_process_in_this_namespace_is_stale(tmp_path):
    from pipeline.storage.lock import INSTANCE

    store = CorpusStore(str(tmp_path))
    (tmp_path / "_lock").write_text(json.dumps({"token": "x", "host": "any", "pid": 999999, "instance": INSTANCE,
                                               "heartbeat": time.time()}))
    OutputLock(store).acquire().release()


@pytest.mark.parametrize("instance", [None, "another-container"])
def test_same_host_name_is_not_the_same_machine(tmp_path, instance):
    """Issue 25: two containers with one host name (or a lock of an older mcprm, with no instance id) must not
    see each other's live lock as stale because the pid does not exist in their own namespace."""
    store = CorpusStore(str(tmp_path))
    rec = {"token": "x", "host": socket.gethostname(), "pid": 999999, "heartbeat": time.time()}
    if instance:
        rec["instance"] = instance
    (tmp_path / "_lock").write_text(json.dumps(rec))
    with pytest.raises(LockError, match="held by another mcprm run"):
        OutputLock(store).acquire()
    assert json.loads((tmp_path / "_lock").read_text())["token"] == "x"


def test_instance_id_is_this_process_namespace():
    import os

    from pipeline.storage.lock import INSTANCE, _instance_id

    assert INSTANCE == _instance_id() and len(INSTANCE) == 16
    if os.path.exists("/proc/self/ns/pid"):  # Linux: boot id and pid namespace, not the host name
        import hashlib

        boot = open("/proc/sys/kernel/random/boot_id").read().strip()
        want = hashlib.sha256(f"{boot}|{os.readlink('/proc/self/ns/pid')}".encode()).hexdigest()[:16]
        assert INSTANCE == want


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
    assert store.exclusive_create  # probed: a second exclusive create of one name fails
    a = OutputLock(store).acquire()
    with pytest.raises(LockError):
        OutputLock(store).acquire()
    a.release()
    OutputLock(store).acquire().release()


def test_heartbeat_refreshes(tmp_path):
    store = CorpusStore(str(tmp_path))
    lk = OutputLock(store, heartbeat_s=0.05).acquire()
    first = json.loads((tmp_path / "_lock").read_text())["heartbeat"]
    time.sleep(0.3)
    assert json.loads((tmp_path / "_lock").read_text())["heartbeat"] > first
    lk.release()


# ---------------------------------------------------------------- issue 13: one writer for real
def _contender(root: str, barrier, results, idx: int) -> None:
    from pipeline.storage.lock import LockError, OutputLock
    from pipeline.storage.store import CorpusStore

    store = CorpusStore(root)
    barrier.wait()
    try:
        lk = OutputLock(store, stale_after_s=600, heartbeat_s=3600).acquire()
        results[idx] = lk.token
    except LockError:
        results[idx] = ""


def test_stale_lock_race_exactly_one_winner_each_round(tmp_path):
    """Many processes see the same stale lock at the same moment: exactly one takes it over, every round (the
    old unlink-then-create takeover let two win in 44 of 200 trials). Winners keep holding (their process
    exits without releasing), so a late contender can never legitimately win after a release."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    n, rounds = 8, 15
    results = ctx.Manager().dict()
    for r in range(rounds):
        root = tmp_path / f"r{r}"
        root.mkdir()
        stale = {"token": f"old{r}", "host": "elsewhere", "pid": 1, "heartbeat": time.time() - 3600}
        (root / "_lock").write_text(json.dumps(stale))
        barrier = ctx.Barrier(n)
        results.clear()
        procs = [ctx.Process(target=_contender, args=(str(root), barrier, results, i)) for i in range(n)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        winners = [t for t in results.values() if t]
        assert len(results) == n and len(winners) == 1, (r, dict(results))
        assert json.loads((root / "_lock").read_text())["token"] == winners[0]


def test_free_output_race_exactly_one_winner(tmp_path):
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    results = ctx.Manager().dict()
    for r in range(10):
        root = tmp_path / f"f{r}"
        root.mkdir()
        results.clear()
        barrier = ctx.Barrier(6)
        procs = [ctx.Process(target=_contender, args=(str(root), barrier, results, i)) for i in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert len([t for t in results.values() if t]) == 1, dict(results)


def test_fencing_check_after_takeover(tmp_path):
    from pipeline.storage.lock import LockLost

    store = CorpusStore(str(tmp_path))
    a = OutputLock(store, heartbeat_s=3600).acquire()
    a.check()  # held
    (tmp_path / "_lock").write_text(json.dumps({"token": "thief", "host": "elsewhere", "pid": 7,
                                               "heartbeat": time.time()}))
    with pytest.raises(LockLost, match="taken over by another run .*elsewhere.*stops without committing"):
        a.check()
    a.release()  # does not remove the other run's lock
    assert json.loads((tmp_path / "_lock").read_text())["token"] == "thief"


def test_taken_over_run_never_overwrites_its_successor(tmp_path):
    """The heartbeat of a run that was taken over (it was paused past the stale limit) must not write over
    the new owner's lock; it marks itself lost instead."""
    store = CorpusStore(str(tmp_path))
    a = OutputLock(store, heartbeat_s=0.05).acquire()
    new = {"token": "successor", "host": "elsewhere", "pid": 7, "heartbeat": time.time()}
    (tmp_path / "_lock").write_text(json.dumps(new))
    time.sleep(0.4)
    assert json.loads((tmp_path / "_lock").read_text()) == new
    assert not a.still_held()
    a.release()


def test_heartbeat_write_errors_are_not_swallowed(tmp_path, caplog):
    from pipeline.storage.lock import LockLost

    store = CorpusStore(str(tmp_path))
    a = OutputLock(store, heartbeat_s=0.05, stale_after_s=0.2).acquire()

    def broken(*args, **kw):
        raise OSError(28, "No space left on device")

    a._beat_once = broken  # the storage starts failing under the run
    with caplog.at_level("WARNING", logger="mcprm"):
        for _ in range(100):
            if a._lost:
                break
            time.sleep(0.05)
    assert "could not refresh the lock" in caplog.text
    with pytest.raises(LockLost, match="could not be refreshed"):
        a.check()
    a.release()


def test_claimer_that_died_mid_takeover_does_not_block_forever(tmp_path):
    import hashlib

    store = CorpusStore(str(tmp_path))
    stale = {"token": "old", "host": "elsewhere", "pid": 1, "heartbeat": time.time() - 3600}
    (tmp_path / "_lock").write_text(json.dumps(stale))
    sid = hashlib.sha256(f"old|{stale['heartbeat']}".encode()).hexdigest()[:16]
    from pipeline.storage.lock import INSTANCE

    (tmp_path / f"_lock.claim-{sid}").write_text(json.dumps({"token": "dead", "host": socket.gethostname(),
                                                            "pid": 999999, "instance": INSTANCE,
                                                            "started": time.time()}))
    lk = OutputLock(store).acquire()
    assert json.loads((tmp_path / "_lock").read_text())["token"] == lk.token
    lk.release()
