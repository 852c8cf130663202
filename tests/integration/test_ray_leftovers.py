"""A Ray that mcprm starts for a run of its own leaves nothing under the temp dir: its files go to a private folder
of the run's own (never ``/tmp/ray``), removed when the process ends; the folder of a driver killed with -9 is
removed by the next mcprm process that starts a Ray, once its owner is provably gone. Real Ray, real processes
this test starts (and only those are signalled); the temp dir is the test's own (``TMPDIR``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from .conftest import ROOT

DRIVER = """
import json, sys, time
sys.path.insert(0, {root!r})
from pipeline.execution.ray_cluster import init_ray
import ray
init_ray()
assert ray.get(ray.remote(lambda: 1).remote()) == 1
print(json.dumps({{"session": ray._private.worker._global_node.get_session_dir_path()}}), flush=True)
if {hold}:
    time.sleep(600)
"""


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


def test_a_plain_ray_run_leaves_no_session_folder(tmpdir_env):
    d, env = tmpdir_env
    r = subprocess.run([sys.executable, "-c", DRIVER.format(root=str(ROOT), hold=False)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    session = json.loads(r.stdout.strip().splitlines()[-1])["session"]
    assert session.startswith(os.path.join(d, "mcprm-ray-"))  # never /tmp/ray
    assert _ours(d) == [] and not os.path.exists(session)


def test_the_folder_of_a_killed_driver_is_removed_by_the_next_ray_start(tmpdir_env):
    d, env = tmpdir_env
    p = subprocess.Popen([sys.executable, "-c", DRIVER.format(root=str(ROOT), hold=True)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        line = p.stdout.readline()
        assert line, "the driver ended before its Ray was up"
        session = json.loads(line)["session"]
        (left,) = _ours(d)
    finally:
        p.send_signal(signal.SIGKILL)  # the driver this test started
        p.wait(60)
    assert os.path.isdir(os.path.join(d, left))
    r = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                        "from pipeline.execution import ray_temp; print(ray_temp.sweep())"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert left in r.stdout and _ours(d) == [] and not os.path.exists(session)
