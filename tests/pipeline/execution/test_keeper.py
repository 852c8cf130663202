"""This machine's Ray for warm workers (pipeline/execution/K.py), with a real keeper this test starts: its
state is this host's and this boot's only (a home folder that the nodes of a cluster share), and Ray's files go
to a private folder (mode 0700) that is gone once the keeper stops."""

from __future__ import annotations

import json
import os
import socket
import stat

import pytest

from pipeline import processes
from pipeline.execution import keeper as K
from pipeline.execution import ray_cluster


@pytest.fixture(scope="module")
def keeper(tmp_path_factory):
    """A keeper of this test's own (its state folder under tmp), stopped at the end."""
    d = str(tmp_path_factory.mktemp("local-ray"))
    st = K.ensure(d)
    try:
        yield d, st
    finally:
        K.stop(d)


def _files(d: str) -> dict[str, bytes]:
    out = {}
    for root, _, names in os.walk(d):
        for n in names:
            if n not in ("claim", "lock", "keeper.log"):
                with open(os.path.join(root, n), "rb") as f:
                    out[os.path.relpath(os.path.join(root, n), d)] = f.read()
    return out


def test_its_ray_answers_the_probe_and_its_keeper_is_recorded_by_identity(keeper):
    d, st = keeper
    assert ray_cluster.answers(st["address"]) is None  # the HTTP/2 handshake of Ray's GCS
    with K.authenticated(d):
        assert ray_cluster.accepts(st["address"]) is None  # and Ray's own first call
    assert st["process"]["pid"] == st["pid"] and st["process"]["start"] == processes.process_start(st["pid"])


def test_rays_files_are_in_a_private_folder(keeper):
    d, st = keeper
    private = st["temp_dir"]
    info = os.stat(private)
    assert info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) == 0o700
    assert any(n.startswith("session_") for _, dirs, _ in os.walk(private) for n in dirs)  # Ray's session is there


def test_another_host_with_the_same_home_neither_sees_nor_touches_it(keeper, monkeypatch):
    d, st = keeper
    before = _files(d)
    monkeypatch.setattr(socket, "gethostname", lambda: "node-2")
    assert K.running(d) is None  # never node 1's Ray, though node 1's keeper pid is alive here
    assert K.stop(d) is None
    assert K.auth_env(d)["RAY_AUTH_TOKEN_PATH"] not in {os.path.join(d, p) for p in before}
    monkeypatch.undo()
    assert _files(d) == before  # node 1's state and token as they were
    assert K.running(d)["pid"] == st["pid"]


def test_another_boot_of_this_host_does_not_take_its_pid_for_a_live_keeper(keeper, monkeypatch, tmp_path):
    d, st = keeper
    other = tmp_path / "boot_id"
    other.write_text("00000000-1111-2222-3333-444444444444\n")
    monkeypatch.setattr(processes, "BOOT_ID_PATH", str(other))
    assert K.running(d) is None
    monkeypatch.undo()
    assert K.running(d)["pid"] == st["pid"]


def test_the_state_names_its_host_and_boot(keeper):
    d, st = keeper
    (folder,) = [n for n in os.listdir(d)]
    assert folder == processes.namespace_key() and folder.startswith(socket.gethostname()[:8])
    with open(os.path.join(d, folder, "state.json")) as f:
        assert json.load(f)["machine"] == folder
    assert stat.S_IMODE(os.stat(os.path.join(d, folder, "auth_token")).st_mode) == 0o600


def test_stopped_the_private_folder_is_gone(tmp_path):
    d = str(tmp_path / "local-ray")
    st = K.ensure(d)
    try:
        assert os.path.isdir(st["temp_dir"])
    finally:
        assert K.stop(d)
    assert K.running(d) is None and not os.path.exists(st["temp_dir"])


def test_a_process_of_another_user_is_alive(monkeypatch):
    def refused(pid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "kill", refused)
    assert processes.pid_alive(12345) is True  # it exists: only its owner may signal it


def test_a_process_that_is_gone_is_not_alive():
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()  # reaped: its pid names no process now
    assert processes.pid_alive(p.pid) is False and processes.pid_alive(os.getpid()) is True
