"""Nothing goes back in time, nothing overwrites a successor: ``manifest.json`` only ever moves to a newer version,
and the lock's heartbeat, takeover and release never replace or remove another owner's lock, on a local disk, on
memory:// and on S3 (moto's server on loopback: ``If-Match`` with the ETag). A paused writer is made by running
the other writer inside the paused one's step (between its read and its write), never by timing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

from pipeline.storage.lock import LockLost, OutputLock, corpus_lock
from pipeline.storage.store import CorpusStore


def _manifest(v: int) -> dict:
    return {"format": "mcprm-corpus", "version": v, "shards": [], "counts": {"solutions": 0}}


def _url(kind: str, tmp_path) -> str:
    return str(tmp_path / "out") if kind == "local" else f"memory://cond-{uuid.uuid4().hex[:8]}/out"


# ------------------------------------------------------------------ manifest.json is monotonic
@pytest.mark.parametrize("kind", ["local", "memory"])
def test_a_late_manifest_write_never_takes_it_back(kind, tmp_path):
    """A passes its second lock check after creating versions/v00001.json and pauses; B commits versions 2 and 3
    meanwhile; A's late copy must leave manifest.json at version 3."""
    url = _url(kind, tmp_path)
    a, b = CorpusStore(url), CorpusStore(url)
    calls = []

    def fence():  # A's lock checks: the second one (after its version file) is where it pauses
        calls.append(1)
        if len(calls) == 2:
            b.commit(_manifest(2))
            b.commit(_manifest(3))
            assert b.manifest()["version"] == 3

    a.commit(_manifest(1), fence=fence)
    assert a.version_manifest(1)["version"] == 1  # A's commit counts
    assert a.manifest()["version"] == 3  # the copy stays at the newest version


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_manifest_repair_never_writes_over_a_newer_copy(kind, tmp_path):
    url = _url(kind, tmp_path)
    store = CorpusStore(url)
    store.commit(_manifest(1))
    store.commit(_manifest(2))
    assert not store.write_manifest(_manifest(1))  # older: left as it is
    assert store.manifest()["version"] == 2
    store.write_bytes("manifest.json", b"{not json")
    assert store.write_manifest(_manifest(2))  # an unreadable copy is replaced
    assert store.manifest()["version"] == 2


# ------------------------------------------------------------------ the lock
def _pause_after_read(lock: OutputLock, during) -> None:
    """Run ``during()`` right after ``lock``'s next read of its record (its heartbeat or release is then paused
    between its read and its write)."""
    real = lock._parse
    armed = [True]

    def parse(raw, rel):
        rec = real(raw, rel)
        if armed[0] and rel == lock.rel:
            armed[0] = False
            during()
        return rec

    lock._parse = parse


def _successor(store: CorpusStore) -> OutputLock:
    # stale_after_s=0: the paused owner counts as stalled; a long heartbeat keeps its thread out of the way
    return OutputLock(CorpusStore(store.url), stale_after_s=0, heartbeat_s=3600)


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_paused_heartbeat_never_overwrites_the_successors_lock(kind, tmp_path):
    store = CorpusStore(_url(kind, tmp_path))
    old = OutputLock(store, heartbeat_s=3600).acquire()
    new: list[OutputLock] = []
    _pause_after_read(old, lambda: new.append(_successor(store).acquire()))
    # memory:// (a conditional write): it finds out it lost the lock instead of writing over it; local disk: it
    # wrote to its own file, which the takeover's rename replaced at the lock's name
    assert old._beat_once() is (kind == "local")
    assert json.loads(store.read_bytes("_lock"))["token"] == new[0].token
    with pytest.raises(LockLost, match="taken over"):
        old.check()
    new[0].check()  # the successor still holds it
    new[0].release()
    old.release()
    assert not store.exists("_lock")


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_paused_release_never_removes_the_successors_lock(kind, tmp_path):
    store = CorpusStore(_url(kind, tmp_path))
    old = OutputLock(store, heartbeat_s=3600).acquire()
    new: list[OutputLock] = []
    _pause_after_read(old, lambda: new.append(_successor(store).acquire()))
    old.release()
    assert json.loads(store.read_bytes("_lock"))["token"] == new[0].token
    new[0].check()
    new[0].release()
    assert not store.exists("_lock")
    if kind == "local":
        assert sorted(os.listdir(tmp_path / "out")) == []  # nothing left of the release's own rename


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_takeover_never_replaces_a_lock_that_changed_after_its_check(kind, tmp_path):
    """A second claim generation cannot happen here, so this is the one remaining writer: the stale owner's
    own heartbeat landing between the takeover's check and its write. On memory:// the takeover then refuses
    (the owner is alive after all); on a local disk the heartbeat went to the old file and the takeover wins."""
    from pipeline.storage.lock import LockError

    store = CorpusStore(_url(kind, tmp_path))
    old = OutputLock(store, heartbeat_s=3600).acquire()
    new = _successor(store)
    new.fence = lambda stale: old._beat_once()  # the "stale" owner refreshes its lock just now
    if kind == "memory":
        with pytest.raises(LockError, match="heartbeat got through while this run tried to take it over"):
            new.acquire()
        assert json.loads(store.read_bytes("_lock"))["token"] == old.token
        old.check()
    else:
        new.acquire()
        assert json.loads(store.read_bytes("_lock"))["token"] == new.token
        new.release()
    old.release()


def test_store_without_conditional_writes_warns_once(caplog, monkeypatch):
    import pipeline.storage.conditional as conditional_mod
    import pipeline.storage.lock as lock_mod

    monkeypatch.setattr(conditional_mod, "_is_memory", lambda fs: False)  # memory:// as a store without If-Match
    store = CorpusStore(f"memory://warn-{uuid.uuid4().hex[:8]}/out")
    assert store.exclusive_create and not store.conditional_replace
    monkeypatch.setattr(lock_mod, "_WARNED", set())
    with caplog.at_level("WARNING", logger="mcprm"):
        OutputLock(store, heartbeat_s=3600).acquire().release()
        OutputLock(store, heartbeat_s=3600).acquire().release()
    assert caplog.text.count("has no conditional writes") == 1
    assert not store.exists("_lock")


# ------------------------------------------------------------------ S3 (moto's server): If-Match with the ETag
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_url():
    import boto3
    import s3fs

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": url, "AWS_ENDPOINT_URL_S3": url}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                boto3.client("s3", endpoint_url=url).create_bucket(Bucket="cond")
                break
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield "s3://cond"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        proc.terminate()
        proc.wait(10)
        s3fs.S3FileSystem.clear_instance_cache()


def test_s3_lock_and_manifest_are_conditional(s3_url):
    store = CorpusStore(f"{s3_url}/{uuid.uuid4().hex[:8]}")
    assert store.exclusive_create and store.conditional_replace  # probed: If-Match is honoured
    # the heartbeat of a paused owner
    old = OutputLock(store, heartbeat_s=3600).acquire()
    new: list[OutputLock] = []
    _pause_after_read(old, lambda: new.append(_successor(store).acquire()))
    assert old._beat_once() is False
    assert json.loads(store.read_bytes("_lock"))["token"] == new[0].token
    # its release
    old2 = new[0]
    newer: list[OutputLock] = []
    _pause_after_read(old2, lambda: newer.append(_successor(store).acquire()))
    old2.release()
    assert json.loads(store.read_bytes("_lock"))["token"] == newer[0].token
    newer[0].release()
    old.release()
    assert not store.exists("_lock")
    # manifest.json never goes back
    a, b = CorpusStore(store.url), CorpusStore(store.url)
    calls = []

    def fence():
        calls.append(1)
        if len(calls) == 2:
            b.commit(_manifest(3))

    a.commit(_manifest(1), fence=fence)
    assert a.manifest()["version"] == 3
    with corpus_lock(CorpusStore(store.url), heartbeat_s=3600):
        pass


def test_s3_a_takeover_that_loses_the_race_does_not_block_the_owners_commit(s3_url):
    """A contender finds the owner's lock stale and fences the next number; the owner's heartbeat gets through
    before the contender's conditional replace, which fails: the contender removes its fence again and says the
    owner is alive, and the owner, which never lost its lock, commits that number."""
    from pipeline.storage.lock import LockError

    store = CorpusStore(f"{s3_url}/{uuid.uuid4().hex[:8]}")
    owner = corpus_lock(store, heartbeat_s=3600).acquire()
    try:
        def fence(stale):  # the owner's heartbeat lands right after the contender's fence
            n = store.fence_next_version(stale)
            assert owner._beat_once()
            return n

        contender = OutputLock(CorpusStore(store.url), stale_after_s=0, fence=fence,
                               unfence=CorpusStore(store.url).unfence_version)
        with pytest.raises(LockError, match="heartbeat got through"):
            contender.acquire()
        assert store.versions() == []  # no fence left
        store.commit(_manifest(1), fence=owner.check)
        assert store.manifest()["version"] == 1 and store.version_manifest(1)["format"] == "mcprm-corpus"
    finally:
        owner.release()
