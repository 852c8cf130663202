"""Faults with real processes and real local Ray: kill -9 of the driver and of an actor, a removed node.

Every test compares the exact rows and labels with an uninterrupted run (``reference_run``).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

from pipeline.corpus import read_corpus
from pipeline.run import label

from .conftest import N_ROWS, make_cfg, own_actor_pids, popen_mcprm, rows_by_key, run_mcprm, wait_for


def _parts(out):
    d = os.path.join(out, "data", "v00001")
    return sorted(f for f in os.listdir(d) if f.endswith(".parquet")) if os.path.isdir(d) else []


def _cli_args(inp, out, *extra):
    return ("label", "--input", inp, "--output", out, "--k", "2", "--strategy", "per-step", "--max-new-tokens", "48", "--shard-size", "1",
            "--executor", "ray", "--num-workers", "1", *extra)


def test_driver_kill_then_rerun_resumes_identically(small_input, reference_run, tmp_path):
    _, _, ref = reference_run
    out = str(tmp_path / "out")
    p = popen_mcprm(*_cli_args(small_input, out))
    wait_for(lambda: len(_parts(out)) >= 2, 300, "two finished shards", p)
    os.killpg(p.pid, signal.SIGKILL)  # the driver and everything in its session
    p.wait()
    done_before = _parts(out)
    assert 2 <= len(done_before) < N_ROWS
    assert not os.path.exists(os.path.join(out, "manifest.json"))  # nothing committed yet
    r = run_mcprm(*_cli_args(small_input, out))
    assert r.returncode == 0, r.stdout + r.stderr
    m = json.load(open(os.path.join(out, "manifest.json")))
    assert m["counts"]["solutions"] == N_ROWS
    assert rows_by_key(read_corpus(out)) == ref
    assert not any(".tmp-" in f for f in os.listdir(os.path.join(out, "data", "v00001")))


def test_actor_kill_is_redone_once(small_input, reference_run, tmp_path):
    _, _, ref = reference_run
    out = str(tmp_path / "out")
    pids_file = tmp_path / "actor_pids.json"
    p = popen_mcprm(*_cli_args(small_input, out), env={"MCPRM_WORKER_PIDS_FILE": str(pids_file)})
    wait_for(lambda: len(_parts(out)) >= 1, 300, "a finished shard", p)
    pids = wait_for(lambda: own_actor_pids(pids_file), 60, "this run's actor process", p)
    os.kill(pids[0], signal.SIGKILL)  # this run's own actor, never another job's
    text, _ = p.communicate(timeout=600)
    assert p.returncode == 0, text
    m = json.load(open(os.path.join(out, "manifest.json")))
    retried = m["throughput"]["retried_shards"]
    assert retried and all(v == 1 for v in retried.values()), retried
    assert rows_by_key(read_corpus(out)) == ref


def test_two_node_cluster_and_node_removed_mid_run(small_input, reference_run, tmp_path):
    import ray
    from ray.cluster_utils import Cluster

    _, _, ref = reference_run
    from ._ray_files import own_ray_files

    ray.shutdown()
    files = own_ray_files()  # Ray's files in a folder of this test's own, not a session folder left in /tmp/ray
    folder = files.__enter__()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "temp_dir": folder})
    worker = cluster.add_node(num_cpus=1)
    try:
        ray.init(address=cluster.address)
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        # 1) a plain run spread over both nodes
        out = str(tmp_path / "two")
        label(make_cfg(small_input, out, executor="ray", num_workers=2, shard_size=1))
        assert rows_by_key(read_corpus(out)) == ref
        # 2) the worker node disappears mid-run: the run completes on the head node
        out2 = str(tmp_path / "removed")
        box = {}

        def go():
            try:
                box["res"] = label(make_cfg(small_input, out2, executor="ray", num_workers=2, shard_size=1))
            except BaseException as e:  # pragma: no cover - reported below
                box["err"] = e

        th = threading.Thread(target=go)
        th.start()
        wait_for(lambda: len(_parts(out2)) >= 1 or "err" in box, 300, "a finished shard")
        cluster.remove_node(worker)
        th.join(timeout=600)
        assert not th.is_alive() and "err" not in box, box.get("err")
        assert rows_by_key(read_corpus(out2)) == ref
        assert box["res"].added == N_ROWS
    finally:
        ray.shutdown()
        cluster.shutdown()
        files.__exit__(None, None, None)
        time.sleep(1)
