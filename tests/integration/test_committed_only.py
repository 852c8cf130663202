"""A version folder holds exactly what its version records: after a kill -9 and the resume, a reader that globs
``data/**/*.parquet`` (what users do with "Parquet shards ready for training") reads each committed row once; a
file that lands there later (a killed run's task still finishing) is named by ``mcprm verify`` and removed by
``mcprm prune``. The driver is a subprocess this test started (``--executor local``), killed by the storage seam
(``fs_seam``) after its third shard; only that child is killed."""

from __future__ import annotations

import glob
import json
import os
import shutil

import pyarrow.parquet as pq

from pipeline.run import label
from pipeline.storage.integrity import verify_corpus

from .conftest import N_ROWS, make_cfg, run_mcprm
from .fs_seam import run_killed

ARGS = ("--k", "2", "--strategy", "per-step", "--max-new-tokens", "48", "--shard-size", "1", "--executor", "local",
        "-q")


def _files(out: str, pattern: str) -> set[str]:
    return {os.path.relpath(p, out) for p in glob.glob(os.path.join(out, "data", "**", pattern), recursive=True)}


def test_after_a_kill_and_the_resume_the_folder_holds_only_committed_shards(small_input, tmp_path):
    out = str(tmp_path / "out")
    r = run_killed("label", "--input", small_input, "--output", out, *ARGS, kill="after:mv:*/part-*.parquet:3")
    assert r.returncode == -9, r.stdout + r.stderr
    assert len(_files(out, "part-*.parquet")) == 3  # the killed run's finished shards, under its owner's names
    res = label(make_cfg(small_input, out, shard_size=1))
    assert res.shards_resumed == 3
    m = json.load(open(os.path.join(out, "manifest.json")))
    recorded = {s["path"] for s in m["shards"]}
    assert _files(out, "*.parquet") == recorded
    assert _files(out, "*.sum.json") == {p[: -len(".parquet")] + ".sum.json" for p in recorded}
    globbed = sum(pq.read_metadata(os.path.join(out, p)).num_rows for p in _files(out, "*.parquet"))
    assert globbed == N_ROWS  # each solution once
    problems, summary = verify_corpus(out)
    assert problems == [] and summary["uncommitted_files"] == []

    # a late file (a killed run's task finishing after the commit): named by verify, removed by prune
    src = os.path.join(out, sorted(recorded)[0])
    late = os.path.join(os.path.dirname(src), "part-00000.0123456789ab.cafef00d.parquet")
    shutil.copyfile(src, late)
    shutil.copyfile(src[: -len(".parquet")] + ".sum.json", late[: -len(".parquet")] + ".sum.json")
    r = run_mcprm("verify", out)
    assert r.returncode != 0
    rel = os.path.relpath(late, out)
    assert late in r.stdout + r.stderr and "mcprm prune" in r.stdout + r.stderr
    assert {p.where for p in verify_corpus(out)[0]} == {late, late[: -len(".parquet")] + ".sum.json"}
    r = run_mcprm("prune", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert rel not in _files(out, "*.parquet") and _files(out, "*.parquet") == recorded
    assert verify_corpus(out)[0] == []
