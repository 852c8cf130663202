"""Issue 29: a run's own workers kept warm on this machine (``--keep-warm``; by default for a GPU backend without
``--ray-address``): the next ``mcprm label`` with the same engine borrows them and starts none; another engine
stops the idle ones and starts its own; once nothing is warm, this machine's Ray stops by itself. Real ``mcprm``
subprocesses, a real local Ray (this test's own: its state folder under tmp_path), the real bundled model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from pipeline.execution import local_head
from pipeline.storage.corpus import read_corpus

from .conftest import ROOT, rows_by_key, run_mcprm

ARGS = ("--k", "2", "--strategy", "per-step", "--max-new-tokens", "48", "--shard-size", "3", "--executor", "ray",
        "--num-workers", "1", "--cpus-per-worker", "1", "--quiet")


@pytest.fixture
def local_ray(tmp_path):
    """This test's own state folder for this machine's Ray (``MCPRM_LOCAL_RAY_DIR``): the keeper the runs start
    is found there, and stopped at the end if it is still up."""
    d = str(tmp_path / "local-ray")
    env = {local_head.DIR_ENV: d, local_head.GRACE_ENV: "3", "RAY_ADDRESS": ""}
    try:
        yield d, env
    finally:
        local_head.stop(d)


def _status(env) -> list[dict]:
    r = run_mcprm("fleet", "status", "--fleet", "local", "--json", env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def test_kept_workers_serve_the_next_run_and_stop_with_the_machines_ray(small_input, reference_run, local_ray,
                                                                       tmp_path):
    d, env = local_ray
    _, _, ref = reference_run
    manifests = []
    for name in ("a", "b"):
        r = run_mcprm("label", "--input", small_input, "--output", str(tmp_path / name), "--keep-warm", "5m", *ARGS,
                      env=env, timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        manifests.append(json.loads((tmp_path / name / "manifest.json").read_text()))
        assert rows_by_key(read_corpus(str(tmp_path / name))) == ref  # the labels of an in-process run
        if name == "a":
            (st,) = _status(env)
            assert st["lease"] is None and st["keep_warm_s"] == 300  # released, warm
    first, second = (m["execution"]["fleet"] for m in manifests)
    assert first["borrowed"] is False and first["workers"] == 1
    assert manifests[0]["throughput"]["engine_start_seconds"] > 0  # the first run started the engine
    assert second["borrowed"] is True and second["pids"] == [st["pid"]]  # the same worker process
    assert manifests[1]["throughput"]["startup_seconds"] == 0.0
    assert "engine_start_seconds" not in manifests[1]["throughput"]

    # another engine (another seed): the idle warm worker is stopped, a new one started and kept
    r = run_mcprm("label", "--input", small_input, "--output", str(tmp_path / "c"), "--keep-warm", "5m", "--seed",
                  "1", *ARGS, env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    third = json.loads((tmp_path / "c" / "manifest.json").read_text())["execution"]["fleet"]
    assert third["borrowed"] is False
    (st3,) = _status(env)
    assert st3["pid"] != st["pid"] and st3["engine"]["seed"] == 1

    # --keep-warm 0: a run of its own, nothing kept, the warm worker untouched
    r = run_mcprm("label", "--input", small_input, "--output", str(tmp_path / "d"), "--keep-warm", "0", *ARGS,
                  env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fleet" not in json.loads((tmp_path / "d" / "manifest.json").read_text())["execution"]
    assert [s["pid"] for s in _status(env)] == [st3["pid"]]

    keeper = local_head.running(d)
    assert keeper is not None
    # a command that needs the GPUs itself (train, score, ...) stops the idle warm workers first
    free = subprocess.run([sys.executable, "-c", "from cli.common import free_gpus; free_gpus('mcprm train')"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, **env})
    assert free.returncode == 0 and "stopped this machine's 1 warm worker(s)" in free.stderr, free.stderr
    assert _status(env) == []
    deadline = time.monotonic() + 120
    while local_head.running(d) is not None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert local_head.running(d) is None  # no warm worker left: the machine's Ray stopped (grace 3 s)


def test_keep_warm_on_a_cluster_needs_a_fleet(small_input, tmp_path):
    r = run_mcprm("label", "--input", small_input, "--output", str(tmp_path / "o"), "--keep-warm", "5m",
                  "--ray-address", "127.0.0.1:1", "--quiet")
    assert r.returncode != 0
    assert "--keep-warm without --fleet" in r.stdout + r.stderr
    assert not (tmp_path / "o").exists()
