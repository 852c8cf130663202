"""Issue 25, unit level: the fence a takeover leaves, the commit it blocks, readers and verify skipping it,
owner-scoped shard names, the exclusive-create probe, the folder fsync after a rename, counts of adopted shards."""

from __future__ import annotations

import json
import os
import pickle
import time

import pytest

from pipeline.storage.integrity import current_manifest, kept_shard, newest_intact_version, verify_corpus
from pipeline.storage.lock import INSTANCE, LockLost, OutputLock, corpus_lock
from pipeline.storage.store import CorpusStore, Fenced, StorageError, is_fenced


def _manifest(v: int) -> dict:
    return {"format": "mcprm-corpus", "version": v, "shards": [], "counts": {"solutions": 0}}


def test_takeover_of_a_live_owner_fences_its_commit(tmp_path):
    store = CorpusStore(str(tmp_path))
    old = corpus_lock(store, heartbeat_s=3600).acquire()
    new = corpus_lock(CorpusStore(str(tmp_path)), stale_after_s=0).acquire()  # the old one counts as stalled
    assert new.fenced == 1 and is_fenced(store.version_manifest(1))
    # the old owner got past its last check before the takeover: its create of version 1 still fails
    with pytest.raises(LockLost, match="fenced version 1.*Nothing was committed"):
        store.commit(_manifest(1))
    assert is_fenced(store.version_manifest(1)) and store.manifest() is None
    CorpusStore(str(tmp_path)).commit(_manifest(2), fence=new.check)  # the new owner commits the next number
    assert store.manifest()["version"] == 2 and store.next_version() == 3
    assert newest_intact_version(store)["version"] == 2 and current_manifest(store)["version"] == 2
    problems, summary = verify_corpus(str(tmp_path))
    assert problems == [] and summary["versions"] == [2] and summary["fenced_versions"] == [1]
    from pipeline.corpus import CorpusError, open_manifest

    with pytest.raises(CorpusError, match="no version 1: that number was claimed at a lock takeover.*\\[2\\]"):
        open_manifest(str(tmp_path), version=1)
    new.release()
    old.release()  # never removes what is not its own
    assert not (tmp_path / "_lock").exists()


def test_commit_made_before_the_takeover_counts_and_skips_manifest_after(tmp_path, caplog):
    store = CorpusStore(str(tmp_path))
    old = corpus_lock(store, heartbeat_s=3600).acquire()
    checks, taken = [], []

    def fence():  # the takeover lands right after the version file is created
        checks.append(1)
        if len(checks) == 2:
            taken.append(corpus_lock(CorpusStore(str(tmp_path)), stale_after_s=0).acquire())
        old.check()

    with caplog.at_level("WARNING", logger="mcprm"):
        store.commit(_manifest(1), fence=fence)
    assert "committed version 1" in caplog.text and "manifest.json is left to the run that took over" in caplog.text
    assert store.version_manifest(1)["version"] == 1 and store.manifest() is None
    assert current_manifest(store, follow_newer=True)["version"] == 1  # readers: the commit counts
    assert is_fenced(store.version_manifest(2))  # the takeover fenced the number after it
    # both locks released: a held lock's heartbeat thread would go on writing (and fsyncing) after the test
    taken[0].release()
    old.release()


def test_dead_owner_in_this_namespace_is_not_fenced_other_namespace_waits(tmp_path):
    store = CorpusStore(str(tmp_path))
    rec = {"token": "t", "host": "h", "pid": 99_999_999, "instance": INSTANCE, "heartbeat": time.time()}
    (tmp_path / "_lock").write_text(json.dumps(rec))
    lk = corpus_lock(store).acquire()  # provably dead: taken over at once, no fence (its process cannot commit)
    assert lk.fenced is None and store.versions() == []
    lk.release()
    (tmp_path / "_lock").write_text(json.dumps(dict(rec, heartbeat=time.time() - 3600, instance="elsewhere")))
    lk = corpus_lock(store).acquire()  # stale by its heartbeat only: it may be alive, so it is fenced
    assert lk.fenced == 1 and is_fenced(store.version_manifest(1))
    lk.release()


def test_prune_keeps_fences(tmp_path):
    from pipeline.storage.prune import prune

    store = CorpusStore(str(tmp_path))
    store.commit(_manifest(1))
    (tmp_path / "_lock").write_text(json.dumps({"token": "t", "host": "h", "pid": 1, "instance": "x",
                                               "heartbeat": time.time() - 3600}))
    lk = corpus_lock(store).acquire()
    assert lk.fenced == 2
    store.commit(_manifest(3), fence=lk.check)
    lk.release()
    res = prune(str(tmp_path), keep=1)
    assert res.kept_versions == [3] and res.removed_versions == [1]
    assert is_fenced(store.version_manifest(2)) and store.next_version() == 4


def test_fenced_version_names_the_owner_in_shard_paths_and_pickles():
    store = CorpusStore("memory://fence-names/out")
    v = Fenced(3, "abcdef012345")
    assert v == 3 and f"{v:05d}" == "00003"
    assert store.shard_rel(v, 2) == "data/v00003/part-00002.abcdef012345.parquet"
    assert store.shard_rel(3, 2) == "data/v00003/part-00002.parquet"  # what older runs wrote
    back = pickle.loads(pickle.dumps(v))
    assert back == 3 and back.owner == "abcdef012345"
    lk = OutputLock(store)
    assert lk.owner == lk.token[:12]


def _table(keys):
    import pyarrow as pa

    from pipeline.storage.schema import arrow_schema

    s = arrow_schema()
    n = len(keys)
    cols = {f.name: pa.nulls(n, f.type) for f in s}
    cols.update({"id": pa.array(keys), "key": pa.array(keys), "problem": pa.array(["p"] * n),
                 "answer": pa.array(["1"] * n), "steps": pa.array([["a", "b", "c"]] * n),
                 "prompt": pa.array(["p"] * n), "completions": pa.array([[]] * n, s.field("completions").type),
                 "labels": pa.array([[True, True, True]] * n), "first_error": pa.array([-1] * n, pa.int32()),
                 "rollouts": pa.array([4] * n, pa.int64()), "rollout_tokens": pa.array([40] * n, pa.int64()),
                 "strategy": pa.array(["per-step"] * n), "k": pa.array([2] * n, pa.int32())})
    for c in ("mc_correct", "mc_total", "mc_ungradable", "mc_no_answer"):
        cols[c] = pa.array([[0, 0, 0]] * n, s.field(c).type)
    for c in ("mc_value", "mc_low", "mc_high"):
        cols[c] = pa.array([[1.0, 1.0, 1.0]] * n, s.field(c).type)
    extra = {f.name: pa.array([None] * n, f.type) for f in s if f.name not in cols}
    cols.update(extra)
    return pa.table({f.name: cols[f.name] for f in s}, schema=s)


def test_adopted_shard_is_a_copy_and_keeps_the_labeling_runs_counts(tmp_path):
    store = CorpusStore(str(tmp_path))
    old_rel = store.shard_rel(Fenced(1, "oldowner0000"), 0)
    new_rel = store.shard_rel(Fenced(1, "newowner0000"), 0)
    counts = {"steps": 6, "rollouts": 8, "rollout_tokens": 80, "reused_rollouts": 5, "ungradable": 1}
    d = store.write_table(old_rel, _table(["k1", "k2"]), counts=counts)
    got = kept_shard(store, old_rel, ["k1", "k2"], into=new_rel)
    assert got["path"] == new_rel and got["sha256"] == d["sha256"] and got["resumed"]
    assert {k: got[k] for k in counts} == counts  # from the sidecar, not re-derived
    recorded = open(tmp_path / new_rel, "rb").read()
    store.write_table(old_rel, _table(["k1", "zz"]))  # the old owner's late write to its own name
    assert open(tmp_path / new_rel, "rb").read() == recorded
    # an older sidecar without counts: what the rows hold
    legacy = "data/v00001/part-00001.parquet"
    store.write_table(legacy, _table(["k3"]))
    got = kept_shard(store, legacy, ["k3"])
    assert got["steps"] == 3 and got["rollouts"] == 4 and got["rollout_tokens"] == 40 and "reused_rollouts" not in got


def test_directory_is_fsynced_after_the_rename(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def spy(fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.startswith(str(tmp_path)):  # only this test's files: other threads in the process may fsync too
            synced.append(path)
        return real(fd)

    if not os.path.exists("/proc/self/fd"):
        pytest.skip("needs /proc to name the file descriptors")
    monkeypatch.setattr(os, "fsync", spy)
    store = CorpusStore(str(tmp_path))
    store.write_bytes("versions/x.json", b"{}")
    store.create_bytes("versions/y.json", b"{}")
    folder = str(tmp_path / "versions")
    # the file's data first (its temporary name), then the folder holding the new name, for each write
    assert [p == folder for p in synced] == [False, True, False, True], synced


# ---------------------------------------------------------------- exclusive create on object stores
def _register_memory_without_condition():
    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem

    class NoConditionMemory(MemoryFileSystem):
        """An object store whose conditional write is silently a plain write (an old s3fs, or an
        S3-compatible server that ignores If-None-Match)."""

        protocol = ("memnocond",)

        def _open(self, path, mode="rb", **kw):
            return super()._open(path, "wb" if mode == "xb" else mode, **kw)

    fsspec.register_implementation("memnocond", NoConditionMemory, clobber=True)


def test_probe_finds_a_real_exclusive_create():
    assert CorpusStore("memory://probe-ok/out").exclusive_create


def test_storage_without_exclusive_create_is_refused_clearly():
    _register_memory_without_condition()
    store = CorpusStore("memnocond://probe-bad/out")
    assert not store.exclusive_create
    with pytest.raises(StorageError, match="does not support an exclusive create.*If-None-Match.*local disk"):
        OutputLock(store).acquire()
    with pytest.raises(StorageError, match="does not support an exclusive create"):
        store.create_bytes("versions/v00001.json", b"{}")
    assert not store.fs.exists(store.path("_lock")) and not store.fs.exists(store.path("versions/v00001.json"))


def test_label_on_a_store_without_exclusive_create_says_so_and_writes_nothing(tmp_path):
    from pipeline.config import LabelConfig
    from pipeline.run import label

    _register_memory_without_condition()
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "a", "problem": "1+1?", "answer": "2", "steps": ["1+1=2", "2"]}) + "\n")
    cfg = LabelConfig(input=[str(inp)], output="memnocond://label-refused/out", k=1, max_new_tokens=8,
                      executor="local", progress=False)
    with pytest.raises(StorageError) as e:
        label(cfg)
    assert str(e.value).startswith("memnocond://label-refused/out: this storage")  # not wrapped again
    assert "does not support an exclusive create" in e.value.message
    store = CorpusStore("memnocond://label-refused/out")
    assert not store.fs.exists(store.root) or store.fs.ls(store.root, detail=False) == []
