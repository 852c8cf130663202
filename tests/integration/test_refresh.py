"""Scheduled refreshes (issue 7): only new items labeled, atomic visibility, one writer, config changes,
storage errors, and all of it on a real S3-compatible server (moto) on loopback."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from pipeline.config import ConfigError
from pipeline.corpus import read_corpus
from pipeline.run import label

from .conftest import N_ROWS, invoke_mcprm, make_cfg, popen_mcprm, rows_by_key, wait_for


@pytest.fixture
def halves(small_input, tmp_path):
    lines = open(small_input).read().splitlines()
    a = tmp_path / "a.jsonl"
    a.write_text("\n".join(lines[: N_ROWS // 2]) + "\n")
    return str(a), small_input


def test_refresh_labels_only_what_is_new(halves, reference_run, tmp_path):
    a, ab = halves
    _, _, ref = reference_run
    out = str(tmp_path / "out")
    r1 = label(make_cfg(a, out))
    assert (r1.version, r1.added, r1.reused) == (1, N_ROWS // 2, 0)
    r2 = label(make_cfg(ab, out))
    assert (r2.version, r2.added, r2.reused) == (2, N_ROWS // 2, N_ROWS // 2)
    # the refreshed corpus is exactly what one uninterrupted run over the whole input gives
    assert rows_by_key(read_corpus(out)) == ref
    # version 1 is still readable, and the history says what each refresh added
    assert len(read_corpus(out, version=1)) == N_ROWS // 2
    m = json.load(open(f"{out}/manifest.json"))
    assert [h["added"] for h in m["history"]] == [N_ROWS // 2, N_ROWS // 2]
    new_keys = set(read_corpus(out).column("key").to_pylist()) - set(read_corpus(out, 1).column("key").to_pylist())
    v2_keys = {k for s in m["history"][1]["shards"] for k in
               __import__("pyarrow.parquet", fromlist=["x"]).read_table(f"{out}/{s}").column("key").to_pylist()}
    assert new_keys == v2_keys
    r3 = label(make_cfg(ab, out))
    assert (r3.added, r3.version) == (0, 2)


def test_reader_sees_old_or_new_never_a_mix(halves, tmp_path):
    a, ab = halves
    out = str(tmp_path / "out")
    label(make_cfg(a, out))
    old = set(read_corpus(out).column("key").to_pylist())
    p = popen_mcprm("label", "--input", ab, "--output", out, "--k", "2", "--strategy", "per-step", "--max-new-tokens", "48",
                    "--shard-size", "1", "--executor", "local", "-q")
    seen = []
    while p.poll() is None:
        seen.append(frozenset(read_corpus(out).column("key").to_pylist()))
        time.sleep(0.05)
    assert p.returncode == 0, p.stdout.read()
    new = set(read_corpus(out).column("key").to_pylist())
    assert len(new) == N_ROWS and old < new
    assert seen and all(s == old or s == new for s in seen)
    assert any(s == old for s in seen)  # the reader did look during the refresh


def test_two_jobs_at_once_one_refuses(halves, tmp_path):
    _, ab = halves
    out = str(tmp_path / "out")
    p = popen_mcprm("label", "--input", ab, "--output", out, "--k", "2", "--strategy", "per-step", "--max-new-tokens", "48",
                    "--executor", "local", "-q")
    wait_for(lambda: os.path.exists(f"{out}/_lock"), 120, "the first job's lock", p)
    r = invoke_mcprm("label", "--input", ab, "--output", out, "--k", "2", "--strategy", "per-step", "--max-new-tokens", "48", "--executor", "local")
    assert r.returncode == 1 and "held by another mcprm run" in r.stderr, r.stderr
    out1, _ = p.communicate(timeout=600)
    assert p.returncode == 0, out1
    assert len(read_corpus(out)) == N_ROWS


def test_changed_meaning_refused_new_version_and_prune(halves, tmp_path):
    a, _ = halves
    out = str(tmp_path / "out")
    label(make_cfg(a, out))
    before = open(f"{out}/manifest.json").read()
    r = invoke_mcprm("label", "--input", a, "--output", out, "--k", "3", "--strategy", "per-step", "--max-new-tokens", "48", "--executor", "local")
    assert r.returncode == 1 and "different configuration" in r.stderr and "k: 2 -> 3" in r.stderr
    assert open(f"{out}/manifest.json").read() == before
    with pytest.raises(ConfigError):
        label(make_cfg(a, out, temperature=0.7))
    res = label(make_cfg(a, out, k=3, overwrite=True))
    assert res.version == 2 and res.added == N_ROWS // 2 and res.reused == 0
    assert set(read_corpus(out).column("k").to_pylist()) == {3}
    assert set(read_corpus(out, version=1).column("k").to_pylist()) == {2}  # old version still readable
    # staged input a kill left behind: in a committed version it goes, in an unfinished one (a resume needs it)
    # it stays
    for v in (2, 3):
        os.makedirs(f"{out}/data/v0000{v}/_staged", exist_ok=True)
        open(f"{out}/data/v0000{v}/_staged/abc.parquet", "wb").write(b"x")
    r = invoke_mcprm("prune", out, "--keep", "1")
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(f"{out}/data/v00001") or not os.listdir(f"{out}/data/v00001")
    assert not os.path.exists(f"{out}/data/v00002/_staged/abc.parquet")
    assert os.path.exists(f"{out}/data/v00003/_staged/abc.parquet")
    assert len(read_corpus(out)) == N_ROWS // 2


def test_disk_full_keeps_previous_version(halves, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from cli.main import app
    from pipeline.storage.store import CorpusStore

    a, ab = halves
    out = str(tmp_path / "out")
    label(make_cfg(a, out))
    before = open(f"{out}/manifest.json").read()
    real = CorpusStore.write_bytes
    calls = {"n": 0}

    def flaky(self, rel, data):
        if rel.endswith(".parquet"):
            calls["n"] += 1
            if calls["n"] == 2:
                raise OSError(errno.ENOSPC, "No space left on device", self.path(rel))
        return real(self, rel, data)

    monkeypatch.setattr(CorpusStore, "write_bytes", flaky)
    r = CliRunner().invoke(app, ["label", "--input", ab, "--output", out, "--k", "2", "--strategy", "per-step", "--max-new-tokens", "48",
                                 "--shard-size", "1", "--executor", "local", "-q"])
    assert r.exit_code == 1, r.output
    assert "No space left on device" in r.output and "previous corpus version is intact" in r.output
    assert open(f"{out}/manifest.json").read() == before
    assert len(read_corpus(out)) == N_ROWS // 2
    monkeypatch.setattr(CorpusStore, "write_bytes", real)
    res = label(make_cfg(ab, out, shard_size=1))  # resumes the unfinished refresh
    assert res.version == 2 and len(read_corpus(out)) == N_ROWS


def _forget_s3_clients() -> None:
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def s3_server(monkeypatch):
    _forget_s3_clients()  # an S3 filesystem cached by an earlier test points at that test's (stopped) server
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": url, "AWS_ENDPOINT_URL_S3": url}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    try:
        import boto3

        def up():
            try:
                boto3.client("s3", endpoint_url=url).create_bucket(Bucket="corpus")
                return True
            except Exception:
                return False

        wait_for(up, 30, "the moto S3 server")
        yield env
    finally:
        proc.terminate()
        proc.wait(10)
        _forget_s3_clients()


def test_label_refresh_resume_on_s3(halves, reference_run, s3_server, tmp_path):
    import fsspec

    a, ab = halves
    _, _, ref = reference_run
    out = "s3://corpus/prm"
    r1 = label(make_cfg(a, out))
    assert r1.added == N_ROWS // 2
    # a killed refresh on S3, then the same command again
    p = popen_mcprm("label", "--input", ab, "--output", out, "--k", "2", "--strategy", "per-step", "--max-new-tokens", "48",
                    "--shard-size", "1", "--executor", "local", "-q")
    fs = fsspec.filesystem("s3")

    def some_parts():
        fs.invalidate_cache()
        return len(fs.glob("corpus/prm/data/v00002/part-*.parquet")) >= 1

    wait_for(some_parts, 300, "a finished shard on S3", p)
    os.killpg(p.pid, 9)
    p.wait()
    r2 = label(make_cfg(ab, out, shard_size=1))
    assert r2.version == 2 and r2.shards_resumed >= 1 and r2.added == N_ROWS // 2
    assert rows_by_key(read_corpus(out)) == ref
    fs.invalidate_cache()
    assert not fs.exists("corpus/prm/_lock")


def test_resume_with_another_shard_size_keeps_finished_shards(small_input, reference_run, tmp_path, monkeypatch):
    from pipeline.execution.shard_worker import ShardWorker

    _, _, ref = reference_run
    out = str(tmp_path / "out")
    real = ShardWorker.process
    calls = {"n": 0}

    def dies_on_third(self, version, shard, sols):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # the run is stopped mid-way
        return real(self, version, shard, sols)

    monkeypatch.setattr(ShardWorker, "process", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        label(make_cfg(small_input, out, shard_size=1))
    monkeypatch.setattr(ShardWorker, "process", real)
    res = label(make_cfg(small_input, out, shard_size=4))  # a performance knob changed on relaunch
    assert res.shards_resumed == 2 and res.added == N_ROWS
    assert rows_by_key(read_corpus(out)) == ref
