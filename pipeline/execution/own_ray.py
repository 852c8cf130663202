"""A Ray that mcprm starts for one process of its own (a plain run on this machine: no ``--ray-address``), which
nothing outlives, even a ``kill -9`` of that process.

A Ray started with ``ray.init()`` in the driver puts its head (GCS, raylet, monitors) in the driver's process
group, tied to the driver by the kernel (a parent-death signal); but the raylet's agents (dashboard agent, runtime
env agent) are its children, not the driver's, and live on for minutes after the driver is killed. So the head is
started elsewhere, as three processes:

- the **watchdog** (this module run as a program, a session of its own): holds a pipe from the driver, which the
  kernel closes however the driver ends; it is a child subreaper, so every process of the head that loses its
  parent becomes its child;
- the **head** (a Python driver that only starts Ray, in a process group of its own, killed if the watchdog dies):
  Ray's head processes and the raylet's agents are in that group;
- the driver joins the head by its address (:func:`pipeline.execution.ray_cluster.init_ray`).

The pipe is close-on-exec, so a process the driver starts (a grader worker, the keeper) never holds it open.
When the pipe closes (the driver exits or is killed), the watchdog kills the head's process group, waits (at most
:data:`STOP_WAIT_S`) until every process of it and every orphan handed to it (Ray's workers) is gone, removes the
private Ray folder (:mod:`pipeline.execution.ray_temp`) and exits. The driver reads the head's address within
:data:`START_TIMEOUT_S` or says what it waited for.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

START_TIMEOUT_S = 180.0  # the longest wait for the head to start and say its address
STOP_WAIT_S = 60.0  # the longest wait, once the driver is gone, for the head's processes to be gone
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36  # prctl(2)

HEAD = """
import json, logging, os, sys
import ray
# Ray makes its temp dir world-writable: a folder inside the private one (mode 0700), which no one else can enter
ray.init(address="local", include_dashboard=False, _temp_dir=os.path.join(sys.argv[1], "r"),
         logging_level=logging.ERROR, log_to_driver=False)
print(json.dumps({"address": ray.get_runtime_context().gcs_address}), flush=True)
sys.stdin.read()  # until the watchdog closes it (or kills this process group)
"""


class OwnRayError(RuntimeError):
    """The head did not start, or did not say its address in time (the message says what was waited for)."""


def _prctl(option: int, arg: int) -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)


def start(temp_dir: str, token: str | None = None) -> dict:
    """Start a head whose files go to ``temp_dir``, tied to this process; its ``address``, ``group`` (the process
    group of its processes), ``auth`` (what a process sets to join it: Ray's token authentication with the token
    at ``token``, default a new one of mode 0600 in ``temp_dir``) and ``watchdog`` (the :class:`subprocess.Popen`
    to close at the end: :func:`stop`)."""
    if token is None:
        import secrets

        token = os.path.join(temp_dir, "auth_token")
        with open(os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(secrets.token_hex(32))
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": token}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])), **auth)
    # The head's own script is the cluster's first driver, and Ray starts an idle worker per CPU for the first
    # driver's job. That job never runs a task (the runs' drivers join later, each with a runtime environment of
    # its own, which those workers do not have): a Python process per CPU, started for nothing, on every start.
    env.setdefault("RAY_prestart_worker_first_driver", "0")
    dog = subprocess.Popen([sys.executable, "-m", "pipeline.execution.own_ray", temp_dir], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, env=env, start_new_session=True, close_fds=True)
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(dog.stdout, selectors.EVENT_READ)
    line = dog.stdout.readline() if sel.select(START_TIMEOUT_S) else b""
    sel.close()
    try:
        got = json.loads(line)
    except ValueError:
        got = None
    if not isinstance(got, dict) or not got.get("address"):
        stop({"watchdog": dog})
        raise OwnRayError(f"this run's own Ray did not start within {START_TIMEOUT_S:g} s (its head said "
                          f"{line.decode(errors='replace').strip() or 'nothing'}); the lines above say why")
    return {**got, "auth": auth, "watchdog": dog}


def stop(head: dict | None, timeout_s: float = STOP_WAIT_S) -> None:
    """End a head :func:`start` started: its pipe closed, the watchdog waited for (it kills the head's group,
    waits for it and removes the folder), at most ``timeout_s``."""
    dog = (head or {}).get("watchdog")
    if dog is None:
        return
    for f in (dog.stdin, dog.stdout):
        try:
            f.close()
        except OSError:
            pass
    try:
        dog.wait(timeout_s)
    except subprocess.TimeoutExpired:
        print(f"[mcprm] this run's own Ray was not gone {timeout_s:g} s after the run: its watchdog (pid {dog.pid}) "
              "goes on stopping it", file=sys.stderr)


def _gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _reap() -> bool:
    """Reap every child that has ended; True once none is left (the head's group and every orphan of it)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False


def _watch(temp_dir: str) -> None:
    """The watchdog: start the head, pass its address on, and end it when the driver's pipe closes."""
    from pipeline.execution import ray_temp

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (a Ctrl-C ends the driver, which closes the pipe)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)

    def own_group() -> None:
        os.setpgid(0, 0)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    head = subprocess.Popen([sys.executable, "-c", HEAD, temp_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            preexec_fn=own_group, close_fds=True)
    try:
        import select

        ready, _, _ = select.select([head.stdout, sys.stdin], [], [], START_TIMEOUT_S)
        if head.stdout in ready:
            line = head.stdout.readline()
            try:
                sys.stdout.buffer.write(json.dumps({**json.loads(line), "group": head.pid}).encode() + b"\n")
                sys.stdout.flush()
            except (ValueError, OSError):
                pass
            while head.poll() is None:  # until the driver's pipe closes (or the head ends by itself)
                if select.select([sys.stdin], [], [], 1.0)[0] and not os.read(sys.stdin.fileno(), 4096):
                    break
    finally:
        try:
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + STOP_WAIT_S
        while not (_reap() and _gone(head.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        ray_temp.remove(temp_dir)


if __name__ == "__main__":  # pragma: no cover - run by start() in a process of its own
    _watch(sys.argv[1])
