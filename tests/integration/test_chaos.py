"""Issue 13, 25: SIGKILL the driver at 25 points across lock, plan, shard writes (before the checksum, between the
checksum and the shard, after the shard) and commit (between the last lock check and the version file, after it,
after manifest.json), of a first run and of a refresh; re-run, and compare every re-run with one uninterrupted
corpus of the same shard size, byte for byte on every label column, and its counts (steps, rollouts, reused
rollouts: a resume counts the shards it takes over as the run that labeled them).

Storage points go through the storage seam (``fs_seam``: the driver's output is ``seamfile://``, a wrapping fsspec
filesystem that SIGKILLs the child before or after the n-th matching operation); the two points before any storage
write of the run (``locked``, ``plan-written``) are ``MCPRM_FAULT`` hooks of ``pipeline.run``. The driver is a
process of its own that this test started (``run_killed`` forks it from a pre-imported interpreter; the
``MCPRM_FAULT`` ones are fresh subprocesses) with ``--executor local`` (shards run in the driver); only that child
is killed.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from pipeline.corpus import read_corpus
from pipeline.run import label
from pipeline.storage.integrity import verify_corpus

from .conftest import N_ROWS, make_cfg, rows_by_key, run_mcprm
from .fs_seam import run_killed

# 8 solutions, one per shard. ``when:op:glob:n`` (fs_seam) or ``fault:point:n`` (pipeline.faults).
PARTS, SUMS = "*/part-*.parquet", "*/part-*.sum.json"
FIRST_RUN = ["fault:locked:1", "fault:plan-written:1", "before:link:*/_lock:1", "before:mv:*/_staged/*:1",
             "before:mv:*/_plan.json:1", f"before:mv:{SUMS}:1", f"before:mv:{SUMS}:3", f"before:mv:{SUMS}:8",
             f"after:mv:{SUMS}:1", f"after:mv:{SUMS}:5", f"after:mv:{SUMS}:8", f"before:mv:{PARTS}:1",
             f"before:mv:{PARTS}:6", f"after:mv:{PARTS}:1", f"after:mv:{PARTS}:2", f"after:mv:{PARTS}:4",
             f"after:mv:{PARTS}:7", f"after:mv:{PARTS}:8", "before:link:*/versions/*:1", "after:link:*/versions/*:1",
             "before:mv:*/manifest.json:1", "after:mv:*/manifest.json:1"]
REFRESH = [f"after:mv:{PARTS}:2", "before:link:*/versions/*:1", "after:link:*/versions/*:1"]
COUNTS = ("solutions", "added", "steps_added", "rollouts", "rollout_tokens", "reused_rollouts")


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


@pytest.fixture(scope="module")
def reference_1(small_input, tmp_path_factory):
    """The uninterrupted run with the same shard size (1) as the killed ones: rows and counts."""
    out = str(tmp_path_factory.mktemp("chaos-ref") / "out")
    res = label(make_cfg(small_input, out, shard_size=1))
    return rows_by_key(read_corpus(out)), res.manifest["counts"]


# Long (26 killed runs): in two xdist groups of alternate points, so both workers can run it at once; each
# builds the module's fixtures (the reference corpus, the half corpus: in-process runs of seconds) itself.
pytestmark = pytest.mark.slow
_POINTS = [("first", p) for p in FIRST_RUN] + [("refresh", p) for p in REFRESH]


@pytest.mark.parametrize("point", [
    pytest.param(p, id=f"{p[0]}-{p[1]}".replace("*/", "").replace("*", ""),
                 marks=pytest.mark.xdist_group(f"chaos-{i % 2}")) for i, p in enumerate(_POINTS)])
def test_sigkill_then_rerun_gives_the_uninterrupted_corpus(point, small_input, reference_1, half_corpus, tmp_path):
    kind, fault = point
    ref, ref_counts = reference_1
    out = str(tmp_path / "out")
    before = None
    if kind == "refresh":
        shutil.copytree(half_corpus, out)
        before = open(os.path.join(out, "versions", "v00001.json"), "rb").read()
    if fault.startswith("fault:"):
        r = run_mcprm(*_args(small_input, out), env={"MCPRM_FAULT": fault.split(":", 1)[1]})
    else:
        r = run_killed(*_args(small_input, out), kill=fault)
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
    if kind == "first" and res.added:  # issue 25: the resumed version counts what an uninterrupted run counts
        assert {k: m["counts"][k] for k in COUNTS} == {k: ref_counts[k] for k in COUNTS}
        assert m["throughput"]["shards_resumed"] == res.shards_resumed
        if res.shards_resumed:  # this run's own rollouts, not the version's
            assert m["throughput"]["rollouts"] < m["counts"]["rollouts"]
    if before is not None:
        assert open(os.path.join(out, "versions", "v00001.json"), "rb").read() == before
        assert len(read_corpus(out, version=1)) == N_ROWS // 2
    # a second re-run is a no-op
    again = label(make_cfg(small_input, out, shard_size=1))
    assert again.version == want_version and again.added == 0


@pytest.mark.xdist_group("chaos-1")
def test_resumed_run_summary_counts_this_run_only(small_input, reference_1, tmp_path):
    """Issue 25: after a kill and the resume, the manifest's counts are an uninterrupted run's, and the summary
    puts this run's own rollouts and tokens (not the version's) beside this run's time."""
    _, ref_counts = reference_1
    out = str(tmp_path / "out")
    r = run_killed(*_args(small_input, out), kill=f"after:mv:{PARTS}:3")
    assert r.returncode == -9, r.stdout + r.stderr
    r = run_mcprm(*_args(small_input, out)[:-1])  # without -q: the summary
    assert r.returncode == 0, r.stdout + r.stderr
    m = json.load(open(os.path.join(out, "manifest.json")))
    assert {k: m["counts"][k] for k in COUNTS} == {k: ref_counts[k] for k in COUNTS}
    t = m["throughput"]
    assert t["shards_resumed"] == 3 and t["shards_run"] == N_ROWS - 3 and t["rollouts"] < m["counts"]["rollouts"]
    assert (f"3 finished shards taken over from the interrupted run); this run: {t['rollouts']:,} rollouts, "
            f"{t['rollout_tokens']:,} tokens in ") in r.stdout, r.stdout
