"""Issue 13: real faults on a real corpus (bit flips, truncation, deleted or stale manifests, storage errors):
every one is detected (`mcprm verify`, readers), repaired by the documented command, or refused with a clear
message, and no earlier version is changed."""

from __future__ import annotations

import errno
import json
import os
import shutil

import pytest

from pipeline.corpus import CorpusError, read_corpus
from pipeline.run import label
from pipeline.storage.integrity import verify_corpus

from .conftest import N_ROWS, invoke_mcprm, make_cfg, rows_by_key
from .fs_seam import run_killed


@pytest.fixture(scope="module")
def committed(small_input, tmp_path_factory):
    """A clean one-version corpus (shard size 1), copied by each test."""
    out = str(tmp_path_factory.mktemp("committed") / "out")
    label(make_cfg(small_input, out, shard_size=1))
    return out


def _copy(src, tmp_path) -> str:
    dst = str(tmp_path / "out")
    shutil.copytree(src, dst)
    return dst


def _flip(path: str, n: int = 30) -> None:
    b = bytearray(open(path, "rb").read())
    for i in range(n):
        b[(97 * i + 200) % len(b)] ^= 0x5A
    open(path, "wb").write(b)


def _truncate(path: str) -> None:
    b = open(path, "rb").read()
    open(path, "wb").write(b[: len(b) // 2])


def _shard(out: str, v: int, i: int) -> str:
    """Shard ``i`` of version ``v`` (its name carries the writing owner's id: the one file there, committed or
    not)."""
    d = os.path.join(out, "data", f"v{v:05d}")
    (name,) = [f for f in os.listdir(d) if f.startswith(f"part-{i:05d}.") and f.endswith(".parquet")]
    return os.path.join(d, name)


@pytest.mark.parametrize("fault", [_flip, _truncate])
def test_damaged_committed_shard_detected_and_repaired_by_rerun(fault, committed, small_input, reference_run, tmp_path):
    _, _, ref = reference_run
    out = _copy(committed, tmp_path)
    v1 = open(os.path.join(out, "versions", "v00001.json"), "rb").read()
    fault(_shard(out, 1, 3))
    problems, _ = verify_corpus(out)
    assert len(problems) == 1 and "part-00003." in problems[0].what and "mcprm label" in problems[0].fix
    r = invoke_mcprm("verify", out)
    assert r.returncode == 1 and "part-00003." in r.stderr, r.stdout + r.stderr
    with pytest.raises(CorpusError, match="part-00003."):
        read_corpus(out, verify=True)
    r = invoke_mcprm("stats", out, "--verify")
    assert r.returncode == 1 and "part-00003." in r.stderr and "Traceback" not in r.stderr
    if fault is _truncate:  # the cheap size check catches truncation even without --verify
        with pytest.raises(CorpusError, match="part-00003\\..*truncated"):
            read_corpus(out)
    # the documented repair: rerun the same label command -> a new version with the damaged rows relabeled
    res = label(make_cfg(small_input, out, shard_size=1))
    assert res.version == 2 and res.added == 1 and res.reused == N_ROWS - 1
    assert rows_by_key(read_corpus(out, verify=True)) == ref
    assert open(os.path.join(out, "versions", "v00001.json"), "rb").read() == v1  # history never rewritten
    problems, summary = verify_corpus(out)
    assert summary["damaged_versions"] == [1] and all("prune" in p.fix for p in problems)
    assert invoke_mcprm("prune", out, "--keep", "1").returncode == 0
    assert invoke_mcprm("verify", out).returncode == 0


def test_damaged_uncommitted_shards_are_relabeled_on_resume(small_input, reference_run, tmp_path):
    _, _, ref = reference_run
    out = str(tmp_path / "out")
    r = run_killed("label", "--input", small_input, "--output", out, "--k", "2", "--strategy", "per-step",
                   "--max-new-tokens", "48", "--shard-size", "1", "--executor", "local", "-q",
                   kill="after:mv:*/part-*.parquet:5")
    assert r.returncode == -9, r.stdout + r.stderr  # killed through the storage seam after the 5th shard
    assert not os.path.exists(os.path.join(out, "manifest.json"))
    _flip(_shard(out, 1, 0), 12)
    _truncate(_shard(out, 1, 1))
    os.unlink(_shard(out, 1, 2)[: -len(".parquet")] + ".sum.json")  # a shard whose checksum was never written
    res = label(make_cfg(small_input, out, shard_size=1))
    assert res.version == 1 and res.shards_resumed == 2 and res.shards_run == N_ROWS - 2
    assert rows_by_key(read_corpus(out, verify=True)) == ref
    assert verify_corpus(out)[0] == []


def test_deleted_or_corrupt_manifest_recovered_versions_unchanged(committed, small_input, tmp_path):
    out = _copy(committed, tmp_path)
    half = tmp_path / "half.jsonl"
    half.write_text("".join(open(small_input).readlines()[:5]))
    # a second version over other input would be refused as "up to date"; add one with --overwrite instead
    label(make_cfg(small_input, out, shard_size=1, seed=1, overwrite=True))
    v1_rows = rows_by_key(read_corpus(out, version=1))
    files = {v: open(os.path.join(out, "versions", f"v0000{v}.json"), "rb").read() for v in (1, 2)}
    for damage in ("delete", "garbage"):
        if damage == "delete":
            os.unlink(os.path.join(out, "manifest.json"))
        else:
            open(os.path.join(out, "manifest.json"), "w").write('{"version": 2, "shards": [')
        if damage == "delete":  # the version file is the commit: readers read it (as label's recovery does)
            assert rows_by_key(read_corpus(out)) == rows_by_key(read_corpus(out, version=2))
        else:
            with pytest.raises(CorpusError, match="mcprm verify .* --repair"):
                read_corpus(out)
        r = invoke_mcprm("verify", out)
        assert r.returncode == 1 and "--repair" in r.stderr
        if damage == "delete":  # rerunning label recovers it (never restarts as version 1)
            res = label(make_cfg(small_input, out, shard_size=1, seed=1))
            assert res.version == 2 and res.added == 0
        else:
            assert invoke_mcprm("verify", out, "--repair").returncode == 0
        assert json.load(open(os.path.join(out, "manifest.json")))["version"] == 2
        assert {v: open(os.path.join(out, "versions", f"v0000{v}.json"), "rb").read() for v in (1, 2)} == files
        assert rows_by_key(read_corpus(out, version=1)) == v1_rows
    # a refresh after the recovery is version 3, and version files are never overwritten
    res = label(make_cfg(small_input, out, shard_size=1, seed=2, overwrite=True))
    assert res.version == 3
    assert {v: open(os.path.join(out, "versions", f"v0000{v}.json"), "rb").read() for v in (1, 2)} == files


def test_version_file_is_never_overwritten(committed, tmp_path):
    from pipeline.storage.store import CorpusStore

    out = _copy(committed, tmp_path)
    store = CorpusStore(out)
    m = store.manifest()
    with pytest.raises(RuntimeError, match="already exists.*never overwritten"):
        store.commit(dict(m, shards=[]))
    assert store.manifest() == m and store.version_manifest(1) == m


def test_storage_errors_name_the_file_and_what_is_intact(small_input, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from cli.main import app
    from pipeline.storage.store import CorpusStore

    real = CorpusStore._write_tmp

    def full(self, path, data):
        if path.endswith(".parquet"):
            raise OSError(errno.ENOSPC, "No space left on device")  # as a real full disk: no file name
        return real(self, path, data)

    monkeypatch.setattr(CorpusStore, "_write_tmp", full)
    out = str(tmp_path / "out")
    args = ["label", "--input", small_input, "--output", out, "--k", "2", "--strategy", "per-step", "--max-new-tokens", "48",
            "--executor", "local", "-q"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 1
    text = " ".join(r.output.split())
    # the first Parquet file a run writes is its staged input (pipeline.run.staging), named in full
    assert "No space left on device" in text and "data/v00001/_staged/" in text.replace(" ", "")
    assert "previous corpus version is intact" not in text and "no corpus version was committed yet" in text
    assert "()" not in text


def test_real_full_disk_tmpfs(small_input, reference_run, tmp_path):
    """A real full disk: a 96 KiB tmpfs (skipped where mounting one is not allowed). The run stops with the
    file named; after the disk grows (remount), the same command resumes to the uninterrupted corpus."""
    import subprocess

    _, _, ref = reference_run
    mnt = tmp_path / "fs"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root, or no mount namespace)")
    try:
        out = str(mnt / "out")
        r = invoke_mcprm(*("label", "--input", small_input, "--output", out, "--k", "2", "--strategy", "per-step", "--max-new-tokens", "48",
                        "--shard-size", "1", "--executor", "local", "-q"))
        text = " ".join(r.stderr.split())
        assert r.returncode == 1, r.stdout + r.stderr
        assert "No space left on device" in text and str(mnt) in text.replace(" ", ""), text
        assert "no corpus version was committed yet" in text and "previous corpus version is intact" not in text
        assert not os.path.exists(os.path.join(out, "manifest.json"))
        subprocess.run(["mount", "-o", "remount,size=8m", str(mnt)], check=True)
        res = label(make_cfg(small_input, out, shard_size=1))
        assert res.version == 1 and rows_by_key(read_corpus(out, verify=True)) == ref
        assert verify_corpus(out)[0] == []
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_reader_between_a_commits_two_writes_gets_the_new_version(committed, small_input, tmp_path):
    """A commit writes versions/vN.json, then replaces manifest.json. A reader that comes in between (or after a
    kill there) reads the whole new version, not an error and never a mix; `mcprm verify` still names the
    pointer left behind, and --repair moves it."""
    out = _copy(committed, tmp_path)
    label(make_cfg(small_input, out, shard_size=1, seed=1, overwrite=True))
    v2_rows = rows_by_key(read_corpus(out))
    shutil.copyfile(os.path.join(out, "versions", "v00001.json"), os.path.join(out, "manifest.json"))
    assert rows_by_key(read_corpus(out)) == v2_rows
    r = invoke_mcprm("verify", out)
    assert r.returncode == 1 and "but version 2 was committed" in r.stderr and "--repair" in r.stderr, r.stderr
    assert invoke_mcprm("verify", out, "--repair").returncode == 0
    assert json.load(open(os.path.join(out, "manifest.json")))["version"] == 2
