"""This machine's own Ray cluster for warm workers kept between ``mcprm label`` runs (issue 29, ``--keep-warm``).

A run that keeps its workers warm on this machine (a GPU backend without ``--ray-address``, by default) needs a
Ray that outlives the command: a Ray a command starts for itself (``ray.init()``) ends with it, and its
detached actors with it. :func:`ensure` finds this machine's **keeper** or starts one: a small process
(``python -m pipeline.execution.local_head``, in a session of its own) that starts a local Ray head as its
driver and watches it. It stops the cluster (and itself) once no fleet worker has been up for its grace time
(:data:`GRACE_S`): the workers stop themselves after their ``--keep-warm`` (pipeline.execution.fleet), and the
keeper then stops Ray; nothing is left running. Ray's processes share the keeper's fate (Ray's kernel
fate-sharing on Linux), so a keeper killed with -9 takes them with it.

State (:func:`state_dir`: ``$MCPRM_LOCAL_RAY_DIR``, default ``~/.cache/mcprm/local-ray``): ``state.json`` (the
keeper's pid and the cluster's address), ``claim`` (touched by each run that is about to use the cluster, so
the keeper does not stop it under the run), ``lock`` (``flock``: one keeper starts, a stop and a claim never
cross) and ``keeper.log``. Ray's own files go to a short folder under the system temp dir (Ray's socket paths
are limited to 107 bytes), never to ``/tmp/ray``, so a plain ``ray.init()`` elsewhere never joins this cluster.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time

log = logging.getLogger("mcprm")

NAMESPACE = "mcprm"  # the Ray namespace of every fleet's actors (pipeline.execution.fleet)
DIR_ENV = "MCPRM_LOCAL_RAY_DIR"
GRACE_ENV = "MCPRM_LOCAL_RAY_GRACE"  # seconds (tests shorten it)
GRACE_S = 60.0  # the keeper stops the cluster once no fleet worker was up (and no run claimed it) this long
START_TIMEOUT_S = 180.0


def state_dir() -> str:
    return os.path.abspath(os.path.expanduser(os.environ.get(DIR_ENV) or "~/.cache/mcprm/local-ray"))


def _paths(d: str) -> dict[str, str]:
    return {k: os.path.join(d, f) for k, f in (("state", "state.json"), ("claim", "claim"), ("lock", "lock"),
                                                 ("log", "keeper.log"), ("token", "auth_token"))}


def auth_env(d: str | None = None) -> dict[str, str]:
    """What a process sets before it joins this machine's cluster: Ray's token authentication, with the token the
    keeper wrote (mode 0600) in the state folder: no other user's process can join the cluster."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": _paths(d or state_dir())["token"]}


def use_auth(d: str | None = None) -> None:
    """Set :func:`auth_env` in this process (Ray reads its mode into a cached config: refreshed here, as Ray's own
    ``_enable_token_auth`` does)."""
    os.environ.update(auth_env(d))
    if "ray" in sys.modules:
        from ray._raylet import Config

        Config.initialize("")


@contextlib.contextmanager
def _locked(d: str):
    os.makedirs(d, exist_ok=True)
    with open(_paths(d)["lock"], "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's pid reused
        return False
    return True


def _read_state(d: str) -> dict | None:
    try:
        with open(_paths(d)["state"]) as f:
            st = json.load(f)
    except (OSError, ValueError):
        return None
    return st if isinstance(st, dict) and _alive(int(st.get("pid", 0) or 0)) and st.get("address") else None


def running(d: str | None = None) -> dict | None:
    """The keeper's state (``pid``, ``address``, ``temp_dir``, ``started_at``) if this machine's cluster is up."""
    return _read_state(d or state_dir())


def _touch(path: str) -> None:
    with open(path, "a"):
        os.utime(path, None)


def ensure(d: str | None = None, timeout_s: float = START_TIMEOUT_S) -> dict:
    """This machine's cluster, started if none is up (a new keeper); claims it for a run about to use it (the
    keeper will not stop it for :data:`GRACE_S` from now)."""
    d = d or state_dir()
    p = _paths(d)
    with _locked(d):
        _touch(p["claim"])
        st = _read_state(d)
        if st is not None:
            return st
        with contextlib.suppress(FileNotFoundError):
            os.remove(p["state"])
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        with open(p["log"], "ab") as logf:
            proc = subprocess.Popen([sys.executable, "-m", "pipeline.execution.local_head", d], stdin=subprocess.DEVNULL,
                                    stdout=logf, stderr=subprocess.STDOUT, start_new_session=True, env=env,
                                    close_fds=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            st = _read_state(d)
            if st is not None and st.get("pid") == proc.pid:
                return st
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        if proc.poll() is None:
            proc.terminate()
        from pipeline.config import ConfigError

        raise ConfigError(f"could not start this machine's Ray for warm workers (--keep-warm): see {p['log']}; "
                          "run with --keep-warm 0 to start workers for this run only")


def fleet_actor_names(ray) -> list[str]:
    """The names of every fleet worker on the connected cluster (``fleet/NAME/I`` in :data:`NAMESPACE`)."""
    return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
            if a.get("namespace") == NAMESPACE and a["name"].startswith("fleet/")]


def _temp_dir(d: str) -> str:
    h = hashlib.sha256(d.encode()).hexdigest()[:8]
    return os.path.join(tempfile.gettempdir(), f"mcprm-ray-{os.getuid()}-{h}")


def _keep(d: str) -> None:
    """The keeper: a local Ray head as this process's driver, stopped once no fleet worker is up for the grace."""
    p = _paths(d)
    grace = float(os.environ.get(GRACE_ENV) or GRACE_S)
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    import secrets

    with open(os.open(p["token"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(secrets.token_hex(32))
    use_auth(d)
    import ray

    ray.init(address="local", include_dashboard=False, _temp_dir=_temp_dir(d), namespace=NAMESPACE,
             logging_level=logging.ERROR, log_to_driver=False)
    st = {"pid": os.getpid(), "address": ray.get_runtime_context().gcs_address, "temp_dir": _temp_dir(d),
          "started_at": time.time()}
    tmp = p["state"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(st, f)
    os.replace(tmp, p["state"])
    print(f"keeper {os.getpid()}: Ray at {st['address']}, stops {grace:g} s after its last fleet worker", flush=True)
    last = time.time()
    while not stop:
        time.sleep(min(2.0, grace / 4))
        try:
            if fleet_actor_names(ray):
                last = time.time()
                continue
        except Exception as e:  # noqa: BLE001 - the cluster is failing: stop
            print(f"keeper: the cluster does not answer ({e}): stopping", flush=True)
            break
        with _locked(d):
            claimed = os.path.getmtime(p["claim"]) if os.path.exists(p["claim"]) else 0.0
            if time.time() - max(last, claimed) > grace and not fleet_actor_names(ray):
                os.remove(p["state"])  # (under the lock: a run now starts a new keeper)
                break
    with _locked(d):
        if (_read_state(d) or {}).get("pid") == os.getpid():
            os.remove(p["state"])
    print(f"keeper {os.getpid()}: no warm worker for {grace:g} s: stopping Ray", flush=True)
    ray.shutdown()


def stop(d: str | None = None, timeout_s: float = 60.0) -> bool:
    """Stop this machine's keeper (and its cluster) now; False if none was up."""
    st = running(d)
    if st is None:
        return False
    os.kill(int(st["pid"]), signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _alive(int(st["pid"])) and time.monotonic() < deadline:
        time.sleep(0.2)
    return True


if __name__ == "__main__":  # pragma: no cover - run by ensure() in a process of its own
    _keep(sys.argv[1])
