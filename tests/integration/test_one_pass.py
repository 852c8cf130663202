"""Issue 15/17: a run reads its input once; the shards it plans are staged beside the output and what runs,
resumes and retries reads them; the plan holds digests, not keys."""

from __future__ import annotations

import json
import os

import pytest

from pipeline.corpus import read_corpus
from pipeline.input import files
from pipeline.run import label
from pipeline.storage.store import ShardError

from .conftest import N_ROWS, invoke_mcprm, make_cfg, rows_by_key, run_mcprm


def _killed_after_plan(inp: str, out: str) -> dict:
    r = run_mcprm("label", "--input", inp, "--output", out, "--k", "2", "--strategy", "per-step", "--max-new-tokens", "48", "--shard-size",
                  "3", "--executor", "local", "-q", env={"MCPRM_FAULT": "plan-written:1"})
    assert r.returncode == -9, r.stdout + r.stderr
    return json.load(open(os.path.join(out, "data", "v00001", "_plan.json")))


def test_input_read_once_and_shards_staged(small_input, reference_run, tmp_path, monkeypatch):
    _, _, ref = reference_run
    out = str(tmp_path / "out")
    plan = _killed_after_plan(small_input, out)
    assert plan["solutions"] == N_ROWS and [sh["rows"] for sh in plan["shards"]] == [3, 3, 2]
    assert all(set(sh) == {"shard", "rows", "keys", "staged", "group"} for sh in plan["shards"])  # no keys
    staged = os.listdir(os.path.join(out, "data", "v00001", "_staged"))
    assert staged == [f"{plan['shards'][0]['staged']}.parquet"]  # consecutive shards, one file
    assert [sh["group"] for sh in plan["shards"]] == [0, 1, 2]
    opened = []
    real = files._read_file

    def counted(url, spec):
        opened.append(url)
        return real(url, spec)

    monkeypatch.setattr(files, "_read_file", counted)
    res = label(make_cfg(small_input, out))  # the rerun: one pass to check the input, shards from staging
    assert opened == [small_input] and res.shards_run == 3
    assert rows_by_key(read_corpus(out)) == ref
    assert not os.path.exists(os.path.join(out, "data", "v00001", "_staged"))  # gone with the commit
    assert not os.path.exists(os.path.join(out, "data", "v00001", "_plan.json"))


def test_damaged_staged_shard_is_staged_again(small_input, reference_run, tmp_path):
    _, _, ref = reference_run
    out = str(tmp_path / "out")
    plan = _killed_after_plan(small_input, out)
    bad = os.path.join(out, "data", "v00001", "_staged", plan["shards"][1]["staged"] + ".parquet")
    with open(bad, "r+b") as f:
        f.seek(100)
        f.write(b"\0" * 64)
    with pytest.raises(ShardError, match="staged shard"):
        label(make_cfg(small_input, out))
    res = label(make_cfg(small_input, out))  # the same command again: staged anew
    assert res.added == N_ROWS
    assert rows_by_key(read_corpus(out)) == ref


def test_bad_input_leaves_no_staged_files(small_input, tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text(open(small_input).read() + '{"problem": "late"}\n')
    out = tmp_path / "out"
    r = invoke_mcprm("label", "--input", str(inp), "--output", str(out), "--k", "2", "--strategy", "per-step", "--shard-size", "1",
                  "--executor", "local")
    assert r.returncode == 1 and "line 9" in r.stderr, r.stderr
    assert not list(out.glob("data/*/_staged/*")) and not list(out.glob("data/*/_plan.json"))


def test_staged_input_left_by_a_kill_after_the_commit_goes(small_input, tmp_path):
    out = tmp_path / "out"
    from .fs_seam import run_killed  # SIGKILL right after manifest.json is written (the storage seam)

    r = run_killed("label", "--input", small_input, "--output", str(out), "--k", "2", "--strategy", "per-step",
                   "--max-new-tokens", "48", "--executor", "local", "-q", kill="after:mv:*/manifest.json:1")
    assert r.returncode == -9, r.stdout + r.stderr
    assert list(out.glob("data/v00001/_staged/*.parquet"))
    res = label(make_cfg(small_input, str(out)))
    assert res.added == 0 and res.version == 1 and not (out / "data" / "v00001" / "_staged").exists()
