"""Issue 13: SIGKILL the driver at 21 points across lock, plan, shard writes (mid-write, after the checksum,
after the shard) and commit (after the version file, after manifest.json), of a first run and of a refresh;
re-run, and compare every re-run with one uninterrupted corpus, byte for byte on every label column.

The kill is placed by ``MCPRM_FAULT=point:n`` (``pipeline.faults``): the driver, a subprocess this test
started with ``--executor local`` (shards run in the driver), SIGKILLs itself the n-th time it reaches
``point``. Only that child is killed.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from pipeline.run import label
from pipeline.storage.corpus import read_corpus
from pipeline.storage.integrity import verify_corpus

from .conftest import N_ROWS, make_cfg, rows_by_key, run_mcprm

# 8 solutions, one per shard: write_bytes calls are the plan (1), sidecar + shard per shard (2..17), the
# manifest (18).
FIRST_RUN = ["locked:1", "plan-written:1", "mid-write:1", "mid-write:2", "mid-write:3", "mid-write:8",
             "mid-write:11", "mid-write:17", "mid-write:18", "sidecar-written:1", "sidecar-written:5",
             "sidecar-written:8", "shard-written:1", "shard-written:2", "shard-written:4", "shard-written:7",
             "shard-written:8", "version-written:1", "manifest-written:1"]
REFRESH = ["shard-written:2", "version-written:1"]


def _args(inp, out):
    return ("label", "--input", inp, "--output", out, "--k", "2", "--strategy", "per-step", "--max-new-tokens", "48", "--shard-size", "1",
            "--executor", "local", "-q")


@pytest.fixture(scope="module")
def half_corpus(small_input, tmp_path_factory):
    d = tmp_path_factory.mktemp("chaos-half")
    half = d / "half.jsonl"
    half.write_text("".join(open(small_input).readlines()[: N_ROWS // 2]))
    out = str(d / "out")
    label(make_cfg(str(half), out, shard_size=1))
    return out


@pytest.mark.parametrize("point", [("first", p) for p in FIRST_RUN] + [("refresh", p) for p in REFRESH],
                         ids=lambda p: f"{p[0]}-{p[1]}")
def test_sigkill_then_rerun_gives_the_uninterrupted_corpus(point, small_input, reference_run, half_corpus, tmp_path):
    kind, fault = point
    _, _, ref = reference_run
    out = str(tmp_path / "out")
    before = None
    if kind == "refresh":
        shutil.copytree(half_corpus, out)
        before = open(os.path.join(out, "versions", "v00001.json"), "rb").read()
    r = run_mcprm(*_args(small_input, out), env={"MCPRM_FAULT": fault})
    assert r.returncode == -9, f"{fault} was not reached:\n{r.stdout}{r.stderr}"
    want_version = 1 if kind == "first" else 2
    res = label(make_cfg(small_input, out, shard_size=1))
    assert res.version == want_version
    got = rows_by_key(read_corpus(out, verify=True))
    assert got == ref  # every column, labels and mc_* counts included, byte for byte
    problems, summary = verify_corpus(out)
    assert problems == [] and summary["versions"] == list(range(1, want_version + 1))
    m = json.load(open(os.path.join(out, "manifest.json")))
    assert m["version"] == want_version and m["counts"]["solutions"] == N_ROWS
    if before is not None:
        assert open(os.path.join(out, "versions", "v00001.json"), "rb").read() == before
        assert len(read_corpus(out, version=1)) == N_ROWS // 2
    # a second re-run is a no-op
    again = label(make_cfg(small_input, out, shard_size=1))
    assert again.version == want_version and again.added == 0
