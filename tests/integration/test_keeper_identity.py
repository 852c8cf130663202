"""This machine's warm workers' keeper is judged by identity, never by "some process has this pid", and its Ray is
joined only once it answers a bounded probe: a keeper that died (kill -9, an OOM kill) and whose pid now names
another process, or whose address does not answer, never makes a command wait. A command that needs no GPU never
looks. ``mcprm fleet down`` returns, saying what it waited for. A second container (another pid namespace, the same
host name, boot and home folder) neither sees this container's keeper nor touches its files.

The "keeper" here is a process this test starts (a sleeping Python), recorded in a state folder of the test's own;
its "Ray address" is a socket this test listens on and never answers. Only processes this test started are
signalled."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from pipeline.execution import keeper, ray_cluster, ray_temp
from pipeline.processes import namespace_key, process_start

from .conftest import ROOT, run_mcprm


@pytest.fixture
def silent_address():
    """A listening socket that never accepts and never answers (a hung or foreign server): its address, and the
    socket (a connection made to it waits in its backlog, so the test can tell whether anything connected)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.setblocking(False)
    try:
        yield f"127.0.0.1:{s.getsockname()[1]}", s
    finally:
        s.close()


@pytest.fixture
def hung_address():
    """A server that answers the HTTP/2 handshake as Ray's GCS does, then never answers a call (a GCS that hangs
    after accepting): its address."""
    import threading

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    conns: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            conns.append(c)
            try:
                c.recv(65536)
                c.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")  # an empty SETTINGS frame, then silence
            except OSError:
                pass

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"127.0.0.1:{s.getsockname()[1]}"
    finally:
        s.close()
        for c in conns:
            c.close()


@pytest.fixture
def fake_keeper(tmp_path):
    """A live process of this test's own, recorded as this machine's keeper in a state folder under tmp_path."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    d = str(tmp_path / "local-ray")
    private = ray_temp.new()
    try:
        yield p, d, private
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        shutil.rmtree(private, ignore_errors=True)


def _record(d: str, pid: int, address: str, private: str, start: str | None = None) -> str:
    folder = keeper.machine_dir(d)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    st = {"pid": pid, "process": {"pid": pid, "start": start or process_start(pid), "namespace": namespace_key()},
          "machine": namespace_key(), "host": socket.gethostname(), "address": address, "temp_dir": private,
          "started_at": 0}
    with open(os.path.join(folder, "state.json"), "w") as f:
        json.dump(st, f)
    with open(os.path.join(folder, "auth_token"), "w") as f:
        f.write("t" * 64)
    return folder


def _connected(sock) -> bool:
    try:
        c, _ = sock.accept()
    except BlockingIOError:
        return False
    c.close()
    return True


def test_a_reused_pid_is_not_a_live_keeper(fake_keeper, silent_address):
    """The recorded keeper died; its pid now names another process (started at another time)."""
    p, d, private = fake_keeper
    _record(d, p.pid, silent_address[0], private, start="1")
    assert keeper.running(d) is None
    assert keeper.stop(d) is None
    assert p.poll() is None  # the process that has the pid now is never signalled


def test_an_address_that_does_not_answer_is_said_within_the_bound(silent_address):
    why = ray_cluster.answers(silent_address[0], timeout_s=0.5)
    assert why is not None and "nothing answered" in why and silent_address[0] in why
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    assert "nothing answers" in ray_cluster.answers(f"127.0.0.1:{port}", timeout_s=0.5)


def test_train_on_a_cpu_machine_never_looks_for_warm_workers(fake_keeper, silent_address, tmp_path):
    p, d, private = fake_keeper
    folder = _record(d, p.pid, silent_address[0], private)
    r = run_mcprm("train", str(tmp_path / "no-corpus"), "--output", str(tmp_path / "prm"), timeout=300,
                  env={keeper.DIR_ENV: d, "CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "warm workers" not in r.stderr
    assert not _connected(silent_address[1])  # nothing even connected to the recorded Ray
    assert p.poll() is None and os.path.exists(os.path.join(folder, "state.json"))


def test_fleet_down_returns_and_says_what_it_waited_for(fake_keeper, silent_address):
    p, d, private = fake_keeper
    _record(d, p.pid, silent_address[0], private)
    r = run_mcprm("fleet", "down", timeout=300, env={keeper.DIR_ENV: d})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "does not answer" in r.stderr and silent_address[0] in r.stderr
    assert f"stopped keeper {p.pid}" in r.stdout
    assert p.wait(60) is not None  # the keeper (this test's process) got its SIGTERM
    assert keeper.running(d) is None and not os.path.exists(private)


def test_a_ray_that_answers_the_handshake_then_hangs_is_said_within_the_bound(hung_address):
    assert ray_cluster.answers(hung_address) is None  # the handshake alone would let it be joined
    why = ray_cluster.accepts(hung_address, timeout_s=1)
    assert why is not None and "answered its handshake but not Ray's first call within 1 s" in why
    assert hung_address in why


def test_label_on_a_cluster_that_hangs_after_the_handshake_says_so(hung_address, small_input, tmp_path):
    r = run_mcprm("label", "--input", small_input, "--output", str(tmp_path / "o"), "--ray-address", hung_address,
                  "--quiet", timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"no Ray cluster answers at {hung_address}" in r.stderr
    assert "answered its handshake but not Ray's first call" in r.stderr and "Traceback" not in r.stderr


def test_fleet_commands_return_when_the_keepers_ray_hangs_after_the_handshake(fake_keeper, hung_address):
    p, d, private = fake_keeper
    _record(d, p.pid, hung_address, private)
    env = {keeper.DIR_ENV: d}
    r = run_mcprm("fleet", "status", timeout=300, env=env)  # joins nothing: says why, exit 1
    assert r.returncode == 1 and "answered its handshake but not Ray's first call" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    r = run_mcprm("fleet", "down", timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "answered its handshake but not Ray's first call" in r.stderr and hung_address in r.stderr
    assert f"stopped keeper {p.pid}" in r.stdout
    assert p.wait(60) is not None
    assert keeper.running(d) is None and not os.path.exists(private)


def _unshare_ok() -> bool:
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True).returncode == 0


OTHER_CONTAINER = """
import json, sys
sys.path.insert(0, {root!r})
from pipeline.execution import keeper as L
folder = L.machine_dir({d!r})
L._reap(folder, L._load(folder))  # what a start of this machine's keeper does first
print(json.dumps({{"folder": folder, "running": L.running({d!r}), "stopped": L.stop({d!r})}}))
"""


@pytest.mark.skipif(not _unshare_ok(), reason="cannot create a pid namespace here (unshare --pid)")
def test_another_pid_namespace_with_the_same_home_neither_sees_nor_touches_it(fake_keeper, silent_address):
    p, d, private = fake_keeper
    folder = _record(d, p.pid, silent_address[0], private)
    before = {n: open(os.path.join(folder, n), "rb").read() for n in os.listdir(folder)}
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                        OTHER_CONTAINER.format(root=str(ROOT), d=d)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    assert seen["folder"] != folder and seen["running"] is None and seen["stopped"] is None
    assert {n: open(os.path.join(folder, n), "rb").read() for n in os.listdir(folder)} == before
    assert os.path.isdir(private) and p.poll() is None


HOLD_LOCK = """
import fcntl, os, sys, time
f = open(sys.argv[1], "a+")
fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


def test_a_held_state_lock_is_waited_for_within_a_bound_and_said(tmp_path):
    """A process stopped while it holds the state folder's lock (SIGSTOP, a paused container) makes the next one
    fail with a message naming the lock, never hang."""
    d = str(tmp_path / "local-ray")
    folder = keeper.machine_dir(d)
    os.makedirs(folder)
    lock = os.path.join(folder, "lock")
    p = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, lock], stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(keeper.KeeperError, match=r"waited 0\.5 s for .*lock, held by another mcprm"):
            with keeper._locked(folder, wait_s=0.5):
                pass
    finally:
        p.kill()  # the holder this test started
        p.wait()
    with keeper._locked(folder, wait_s=5):  # released with its holder
        pass
