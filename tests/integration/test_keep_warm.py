"""A run's own workers kept warm on this machine when asked (``--keep-warm``): the next ``mcprm label --keep-warm``
with the same engine borrows them and starts none; another engine stops the idle ones and starts its own; once
nothing is warm, this machine's Ray stops by itself. Every way a run ends says what it keeps and how to stop it;
``mcprm fleet down`` stops it. Chaos: the keeper killed with -9 takes its Ray (every process of it, the raylet's
agents too) and workers with it and the next run starts afresh; a run killed with -9 leaves its workers to the
rerun, and nothing outlives the keep-warm. Real ``mcprm`` subprocesses, a real local Ray (this test's own: its
state folder under tmp_path), the real bundled model; only processes this test started are signalled."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from pipeline.bundled import SAMPLE_PATH
from pipeline.corpus import read_corpus
from pipeline.execution import keeper as K
from pipeline.processes import pid_alive

from .conftest import ROOT, invoke_mcprm, own_actor_pids, popen_mcprm, rows_by_key, run_mcprm, wait_for

pytestmark = pytest.mark.slow  # four runs with kept workers and this machine's Ray, minutes in all (started first: tests/conftest.py)

ARGS = ("--k", "2", "--strategy", "per-step", "--max-new-tokens", "48", "--shard-size", "3", "--executor", "ray",
        "--num-workers", "1", "--cpus-per-worker", "1", "--quiet")


@pytest.fixture
def local_ray(tmp_path):
    """This test's own state folder for this machine's Ray (``MCPRM_LOCAL_RAY_DIR``): the keeper the runs start
    is found there, and stopped at the end if it is still up."""
    d = str(tmp_path / "local-ray")
    env = {K.DIR_ENV: d, K.GRACE_ENV: "3", "RAY_ADDRESS": ""}
    try:
        yield d, env
    finally:
        K.stop(d)


def _says_kept(text: str, d: str, workers: int = 1) -> bool:
    """The run said what it keeps, until when, and the exact command that stops it."""
    return (f"kept warm on this machine: {workers} worker(s)" in text and " until " in text
            and f"Stop them now: {K.DIR_ENV}={d} mcprm fleet down" in text)


def _parts(out: str) -> list[str]:
    v = os.path.join(out, "data", "v00001")
    return [f for f in os.listdir(v) if f.endswith(".parquet")] if os.path.isdir(v) else []


def _gone(pids) -> bool:
    return not any(pid_alive(p) for p in pids)


def _status(env) -> list[dict]:
    r = run_mcprm("fleet", "status", "--fleet", "local", "--json", env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


@pytest.mark.timeout(1800)  # three runs with Ray on a loaded 2-core machine
def test_kept_workers_serve_the_next_run_and_stop_with_the_machines_ray(small_input, reference_run, local_ray,
                                                                       tmp_path):
    d, env = local_ray
    _, _, ref = reference_run
    manifests = []
    for name in ("a", "b"):
        r = run_mcprm("label", "--input", small_input, "--output", str(tmp_path / name), "--keep-warm", "5m", *ARGS,
                      env=env, timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        assert _says_kept(r.stdout + r.stderr, d)
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

    keeper = K.running(d)
    assert keeper is not None
    # a command that needs the GPUs itself (train, score, ...) stops the idle warm workers first (on a machine that
    # shows a GPU: CUDA_VISIBLE_DEVICES; without one, nothing looks for warm workers at all)
    free = subprocess.run([sys.executable, "-c", "from cli.common import free_gpus; free_gpus('mcprm train')"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, **env, "CUDA_VISIBLE_DEVICES": "0"})
    assert free.returncode == 0 and "stopped this machine's 1 warm worker(s)" in free.stderr, free.stderr
    assert _status(env) == []
    deadline = time.monotonic() + 120
    while K.running(d) is not None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert K.running(d) is None  # no warm worker left: the machine's Ray stopped (grace 3 s)


def test_keep_warm_on_a_cluster_needs_a_fleet(small_input, tmp_path):
    # refused while the options are read (a message and an exit code, nothing started): in this process
    r = invoke_mcprm("label", "--input", small_input, "--output", str(tmp_path / "o"), "--keep-warm", "5m",
                  "--ray-address", "127.0.0.1:1", "--quiet")
    assert r.returncode != 0
    assert "--keep-warm without --fleet" in r.stdout + r.stderr
    assert not (tmp_path / "o").exists()


def test_every_exit_says_what_is_kept_and_fleet_down_stops_it(small_input, local_ray, tmp_path):
    d, env = local_ray
    pids_file = tmp_path / "pids.json"
    # Ctrl-C mid-run: the run stops, its workers stay warm as asked, and it says so. The signal goes once two
    # shards are written (Ray and the worker are up, the run is labeling), and 200 rows leave it far from done
    many = tmp_path / "many.jsonl"
    many.write_text("".join(x + "\n" for x in SAMPLE_PATH.read_text().splitlines()[:200]))
    p = popen_mcprm("label", "--input", str(many), "--output", str(tmp_path / "a"), "--keep-warm", "5m",
                    *ARGS, env={**env, "MCPRM_WORKER_PIDS_FILE": str(pids_file)})
    try:
        wait_for(lambda: len(_parts(str(tmp_path / "a"))) >= 2, 600, "two finished shards", p)
        p.send_signal(signal.SIGINT)
        text, _ = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode != 0 and _says_kept(text, d), text
    workers = own_actor_pids(pids_file)
    assert workers and not _gone(workers)
    # `mcprm fleet down` with no name finds them: workers and this machine's Ray stop now
    r = run_mcprm("fleet", "down", env=env, timeout=300)
    assert r.returncode == 0 and "stopped 1 worker(s)" in r.stdout, r.stdout + r.stderr
    assert K.running(d) is None
    wait_for(lambda: _gone(workers), 120, "the warm worker to stop")
    r = run_mcprm("fleet", "down", env=env, timeout=300)
    assert r.returncode == 0 and "no warm workers are kept on this machine" in r.stdout, r.stdout + r.stderr

    # a run that fails (a worker raises on a row) says so too
    pids_file.unlink()
    r = run_mcprm("label", "--input", small_input, "--output", str(tmp_path / "b"), "--keep-warm", "5m", *ARGS,
                  env={**env, "MCPRM_FAULT_RAISE": "label-solution:synth-20250-00000",
                       "MCPRM_WORKER_PIDS_FILE": str(pids_file)}, timeout=900)
    assert r.returncode != 0 and "injected fault" in r.stdout + r.stderr, r.stdout + r.stderr
    assert _says_kept(r.stdout + r.stderr, d)
    workers = own_actor_pids(pids_file)
    r = run_mcprm("fleet", "down", env=env, timeout=300)
    assert r.returncode == 0 and "stopped 1 worker(s)" in r.stdout, r.stdout + r.stderr
    wait_for(lambda: _gone(workers) and K.running(d) is None, 120, "nothing left running")


def test_keeper_killed_takes_its_ray_with_it_and_the_next_run_starts_afresh(small_input, reference_run, local_ray,
                                                                             tmp_path):
    d, env = local_ray
    _, _, ref = reference_run
    st = K.ensure(d)  # this test's own keeper (its child): the runs below use it
    keeper = st["pid"]
    pids_file = tmp_path / "pids.json"
    r = run_mcprm("label", "--input", small_input, "--output", str(tmp_path / "a"), "--keep-warm", "5m", *ARGS,
                  env={**env, "MCPRM_WORKER_PIDS_FILE": str(pids_file)}, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert K.running(d)["pid"] == keeper
    workers = own_actor_pids(pids_file)
    assert workers and not _gone(workers)

    os.kill(keeper, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):  # reaped here (a child of this process)
        os.waitpid(keeper, 0)
    assert K.running(d) is None
    wait_for(lambda: _gone(workers), 120, "the warm worker to go with its keeper")
    host, port = st["address"].rsplit(":", 1)

    def refused() -> bool:
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
        except OSError:
            return True
        return False

    wait_for(refused, 120, "the keeper's Ray to stop answering")

    def group_gone() -> bool:  # the process group recorded for the keeper's Ray (head and agents): signal 0 only
        try:
            os.killpg(st["ray_group"], 0)
        except ProcessLookupError:
            return True
        return False

    wait_for(group_gone, 120, "every process of the keeper's Ray (its agents too) to be gone")

    r = run_mcprm("label", "--input", small_input, "--output", str(tmp_path / "b"), "--keep-warm", "5m", *ARGS,
                  env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert rows_by_key(read_corpus(str(tmp_path / "b"))) == ref
    fleet = json.loads((tmp_path / "b" / "manifest.json").read_text())["execution"]["fleet"]
    assert fleet["borrowed"] is False  # a new keeper, new workers
    new = K.running(d)
    assert new is not None and new["pid"] != keeper and not os.path.exists(st["temp_dir"])
    r = run_mcprm("fleet", "down", env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert K.running(d) is None


def test_run_killed_while_using_kept_workers_the_rerun_takes_them_and_nothing_outlives_them(
        small_input, reference_run, local_ray, tmp_path):
    d, env = local_ray
    _, _, ref = reference_run
    pids_file = tmp_path / "pids.json"
    r = run_mcprm("label", "--input", small_input, "--output", str(tmp_path / "a"), "--keep-warm", "5m", *ARGS,
                  env={**env, "MCPRM_WORKER_PIDS_FILE": str(pids_file)}, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    workers = own_actor_pids(pids_file)
    keeper = K.running(d)

    out = str(tmp_path / "b")
    args = ("label", "--input", small_input, "--output", out, *ARGS)
    p = popen_mcprm(*args, "--keep-warm", "5m", env=env)  # borrows the warm worker
    try:
        wait_for(lambda: _parts(out), 600, "a finished shard", p)
    finally:
        os.killpg(p.pid, signal.SIGKILL)  # this test's own child and its session (the keeper has its own)
        p.wait()
    assert not os.path.exists(os.path.join(out, "manifest.json"))

    # the rerun finds the worker leased to a run whose process is gone: it takes it over at once
    r = run_mcprm(*args, "--keep-warm", "3s", env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert rows_by_key(read_corpus(out)) == ref
    fleet = json.loads(open(os.path.join(out, "manifest.json")).read())["execution"]["fleet"]
    assert fleet["borrowed"] is True and fleet["pids"] == workers
    # released with 3 s of keep-warm: the worker stops itself, then the keeper stops this machine's Ray
    wait_for(lambda: _gone([*workers, keeper["pid"]]) and K.running(d) is None, 300, "nothing left running")
    wait_for(lambda: not os.path.exists(keeper["temp_dir"]), 60, "Ray's private folder removed")
