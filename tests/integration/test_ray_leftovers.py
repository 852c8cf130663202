"""A Ray that mcprm starts for a run of its own leaves nothing behind: its files go to a private folder of the
run's own (never ``/tmp/ray``), removed when the process ends, and its processes -- Ray's head (GCS, raylet,
monitors) and the raylet's agents, in a process group of their own that mcprm records -- and its workers are gone
once the driver ends, even by kill -9 (a watchdog holds a pipe from the driver). A folder whose owner is provably
gone is removed by the next mcprm process that starts a Ray. Real Ray, real processes this test starts (and only
those are signalled; the Ray processes are checked by the process group and the worker's pid and start time the
driver recorded, never looked for); the temp dir is the test's own (``TMPDIR``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile

import pytest

from pipeline.processes import process_gone

from .conftest import ROOT, wait_for

DRIVER = """
import json, sys, time
sys.path.insert(0, {root!r})
from pipeline.execution.ray_cluster import init_ray, own_ray_head
from pipeline.processes import this_process
import ray
init_ray()
worker = ray.get(ray.remote(this_process).remote())  # a Ray worker process: its pid and start time
print(json.dumps({{"session": ray._private.worker._global_node.get_session_dir_path(),
                  "group": own_ray_head()["group"], "worker": worker}}), flush=True)
if {hold}:
    time.sleep(600)
"""


def _group_gone(pgid: int) -> bool:
    """No process is left in the process group mcprm recorded for its Ray's head (signal 0 checks, sends nothing)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def tmpdir_env():
    # short: Ray's socket paths under it are limited to 107 bytes
    d = tempfile.mkdtemp(prefix="r", dir="/tmp")
    try:
        yield d, dict(os.environ, TMPDIR=d, RAY_ADDRESS="", PYTHONPATH=str(ROOT))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _ours(d: str) -> list[str]:
    return [n for n in os.listdir(d) if n.startswith("mcprm-ray-")]


def test_a_plain_ray_run_leaves_no_session_folder_and_no_process(tmpdir_env):
    d, env = tmpdir_env
    r = subprocess.run([sys.executable, "-c", DRIVER.format(root=str(ROOT), hold=False)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["session"].startswith(os.path.join(d, "mcprm-ray-"))  # never /tmp/ray
    assert _ours(d) == [] and not os.path.exists(got["session"])
    wait_for(lambda: _group_gone(got["group"]) and process_gone(got["worker"]), 120, "Ray's processes to be gone")


def test_a_driver_killed_with_9_leaves_no_ray_process_and_no_folder(tmpdir_env):
    d, env = tmpdir_env
    p = subprocess.Popen([sys.executable, "-c", DRIVER.format(root=str(ROOT), hold=True)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        line = p.stdout.readline()
        assert line, "the driver ended before its Ray was up"
        got = json.loads(line)
        (left,) = _ours(d)
        assert not _group_gone(got["group"]) and not process_gone(got["worker"])  # up while the driver is
        assert stat.S_IMODE(os.stat(os.path.join(d, left)).st_mode) == 0o700  # no one else enters it
    finally:
        p.send_signal(signal.SIGKILL)  # the driver this test started
        p.wait(60)
    wait_for(lambda: _group_gone(got["group"]), 120, "Ray's head and agents to be gone after the driver's kill -9")
    wait_for(lambda: process_gone(got["worker"]), 120, "the Ray worker to be gone")
    wait_for(lambda: not os.path.exists(os.path.join(d, left)), 120, "the run's Ray folder to be removed")


OWNER = """
import sys, time
sys.path.insert(0, {root!r})
from pipeline.execution import ray_temp
print(ray_temp.new(), flush=True)
time.sleep(600)
"""


def test_the_folder_of_a_gone_owner_is_removed_by_the_next_ray_start(tmpdir_env):
    """A folder left by a process killed with -9 before anything could remove it (its watchdog gone too) is removed
    by the next mcprm process that starts a Ray; one of a live owner is left alone."""
    d, env = tmpdir_env
    p = subprocess.Popen([sys.executable, "-c", OWNER.format(root=str(ROOT))], env=env, stdout=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        left = os.path.basename(p.stdout.readline().strip())
        assert left in _ours(d)
        sweep = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                 "from pipeline.execution import ray_temp; print(ray_temp.sweep())"]
        r = subprocess.run(sweep, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and left not in r.stdout and left in _ours(d), r.stderr  # its owner lives
    finally:
        p.send_signal(signal.SIGKILL)  # the owner this test started
        p.wait(60)
    r = subprocess.run(sweep, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert left in r.stdout and _ours(d) == []
