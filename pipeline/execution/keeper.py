"""This machine's keeper: the Ray cluster that holds this machine's warm workers (the fleet named ``local``,
:mod:`pipeline.execution.fleet`) between ``mcprm label --keep-warm`` runs, and joining it.

A run that keeps its workers warm on this machine (``--keep-warm DURATION``, or ``keep_warm`` in its run file)
needs a Ray that outlives the command: a Ray a command starts for itself (``ray.init()``) ends with it, and its
detached actors with it. :func:`ensure` finds this machine's **keeper** or starts one: a small process
(``python -m pipeline.execution.keeper``, in a session of its own) that starts a local Ray head as its
driver and watches it. It stops the cluster (and itself) once no fleet worker has been up for its grace time
(:data:`GRACE_S`): the workers stop themselves after their ``--keep-warm`` (pipeline.execution.fleet), and the
keeper then stops Ray; nothing is left running. Ray's processes share the keeper's fate (Ray's kernel
fate-sharing on Linux), so a keeper killed with -9 takes them with it.

State lives under :func:`state_dir` (``$MCPRM_LOCAL_RAY_DIR``, default ``~/.cache/mcprm/local-ray``), in a folder
of this host, boot and pid namespace (:func:`pipeline.processes.namespace_key`): a home folder that the nodes of
a cluster, or two containers on one host, share holds one folder per node and container, and none reads, joins,
deletes or overwrites another's (a pid means something only in its own namespace). In it: ``state.json`` (the
keeper's pid and start time, and the cluster's address), ``claim`` (touched by each run that is about to use the
cluster, so the keeper does not stop it under the run), ``lock`` (``flock``, waited for at most
:data:`LOCK_WAIT_S`: one keeper starts, a stop and a claim never cross), ``auth_token`` (mode 0600: Ray's token
authentication, so no other user's process joins) and ``keeper.log``. Ray's own files go to a private folder
(:mod:`pipeline.execution.ray_temp`) that the keeper removes when it stops. Never ``/tmp/ray``: a plain
``ray.init()`` elsewhere never joins this cluster.

A keeper counts as running only when its recorded pid still names the process recorded (its start time too: a
pid is reused after a kill -9 or an OOM kill), and its cluster is joined only once its address answers
(:func:`pipeline.execution.ray_cluster.answers`, a bounded probe of its handshake, then ``accepts``, a bounded
first call of Ray's own): a keeper that died, or whose Ray does not answer, never makes a command wait.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import time

from pipeline.errors import FatalError
from pipeline.execution import ray_temp
from pipeline.execution.ray_cluster import accepts, answers
from pipeline.processes import namespace_key, process_gone, same_process, this_process

log = logging.getLogger("mcprm")

NAMESPACE = "mcprm"  # the Ray namespace of every fleet's actors (pipeline.execution.fleet)
DIR_ENV = "MCPRM_LOCAL_RAY_DIR"
GRACE_ENV = "MCPRM_LOCAL_RAY_GRACE"  # seconds (tests shorten it)
GRACE_S = 60.0  # the keeper stops the cluster once no fleet worker was up (and no run claimed it) this long
START_TIMEOUT_S = 180.0
TEMP_PREFIX = ray_temp.PREFIX  # the keeper's private folder for Ray's files, under the system temp dir
# the longest wait for the state folder's lock: held by a claim (moments), a stop (STOP_WAIT_S and a kill) or a
# start (START_TIMEOUT_S at most), so more than the longest of these
LOCK_WAIT_S = START_TIMEOUT_S + 60.0
STOP_WAIT_S = 30.0  # a stopped keeper that is not gone after this long is killed, with its process group


class KeeperError(FatalError, RuntimeError):
    """This machine's keeper cannot be reached or stopped in time (the message says what was waited for)."""


def state_dir() -> str:
    """The folder under which each machine (host and boot) keeps its own state (:func:`machine_dir`)."""
    return os.path.abspath(os.path.expanduser(os.environ.get(DIR_ENV) or "~/.cache/mcprm/local-ray"))


def machine_dir(d: str | None = None) -> str:
    """This host's, boot's and pid namespace's own state folder under ``d`` (default :func:`state_dir`)."""
    return os.path.join(d or state_dir(), namespace_key())


def _paths(folder: str) -> dict[str, str]:
    return {k: os.path.join(folder, f) for k, f in (("state", "state.json"), ("claim", "claim"), ("lock", "lock"),
                                                      ("log", "keeper.log"), ("token", "auth_token"))}


def auth_env(d: str | None = None) -> dict[str, str]:
    """What a process sets before it joins this machine's cluster: Ray's token authentication, with the token the
    keeper wrote (mode 0600) in this machine's state folder: no other user's process can join the cluster."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": _paths(machine_dir(d))["token"]}


def use_auth(d: str | None = None) -> None:
    """Set :func:`auth_env` in this process."""
    from pipeline.execution.ray_cluster import use_token

    use_token(auth_env(d))


@contextlib.contextmanager
def authenticated(d: str | None = None):
    """:func:`use_auth` for a block: the variables as they were afterwards (a process that only looked at this
    machine's workers starts a Ray of its own later without this cluster's token)."""
    before = {k: os.environ.get(k) for k in auth_env(d)}
    use_auth(d)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        from pipeline.execution.ray_cluster import refresh_ray_config

        refresh_ray_config()


@contextlib.contextmanager
def _locked(folder: str, wait_s: float | None = None):
    """The state folder's lock, waited for at most ``wait_s`` (default :data:`LOCK_WAIT_S`): a process stopped
    while it holds it (SIGSTOP, a paused container) makes others fail with a message, never hang."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = _paths(folder)["lock"]
    deadline = time.monotonic() + (LOCK_WAIT_S if wait_s is None else wait_s)
    with open(path, "a+") as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise KeeperError(f"waited {LOCK_WAIT_S if wait_s is None else wait_s:g} s for {path}, held by "
                                      "another mcprm process of this machine (starting or stopping its warm "
                                      "workers' Ray, or stopped while it does); try again once it is done") from None
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _load(folder: str) -> dict | None:
    try:
        with open(_paths(folder)["state"]) as f:
            st = json.load(f)
    except (OSError, ValueError):
        return None
    return st if isinstance(st, dict) else None


def _live(st: dict | None) -> dict | None:
    """``st`` if it is the state of a keeper of this host, boot and pid namespace that still runs (its pid names
    the very process recorded, start time and all), with its cluster's address."""
    if not st or st.get("machine") != namespace_key() or not st.get("address"):
        return None
    return st if same_process(st.get("process")) else None


def running(d: str | None = None) -> dict | None:
    """The keeper's state (``pid``, ``process``, ``machine``, ``address``, ``temp_dir``, ``started_at``,
    ``ray_group``: the process group of its Ray's processes, :mod:`pipeline.execution.own_ray`) if this
    machine's keeper runs (its address not probed: :func:`pipeline.execution.ray_cluster.answers`)."""
    return _live(_load(machine_dir(d)))


def stop_command() -> str:
    """The exact command that stops this machine's warm workers (with this process's state folder, if not the
    default one)."""
    import shlex

    d = os.environ.get(DIR_ENV)
    return (f"{DIR_ENV}={shlex.quote(d)} " if d else "") + "mcprm fleet down"


def join(st: dict, log_to_driver: bool = False) -> bool | None:
    """Connect this process to this machine's Ray (``st``: its keeper's state): True when it joined now, False when
    it was connected already, None when it is connected to another Ray (left as it is). A Ray that does not answer
    within the probes' bounds is never joined (Ray itself retries such an address for minutes): a
    :class:`KeeperError` says what was waited for."""
    from pipeline.execution.ray_cluster import init_ray

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return False if ray.get_runtime_context().gcs_address == st["address"] else None
    use_auth()
    why = answers(st["address"]) or accepts(st["address"])
    if why is not None:
        raise KeeperError(f"this machine's warm workers' Ray does not answer ({why}); stop it with "
                          f"`{stop_command()}` and rerun")
    init_ray(st["address"], log_to_driver=log_to_driver)
    return True


def connected(what: str):
    """(ray, joined) connected to this machine's Ray with its token, or None when no keeper runs here, its Ray does
    not answer (said, with ``what`` that is then skipped) or this process is connected to another Ray. The caller
    shuts Ray down if ``joined``, inside :func:`authenticated` (which puts the token variables back)."""
    st = running()
    if st is None:
        return None
    try:
        joined = join(st)
    except KeeperError as e:
        log.warning("%s; %s", e, what)
        return None
    if joined is None:
        log.warning("this process is connected to another Ray: this machine's warm workers were not checked")
        return None
    import ray

    return ray, joined


def _touch(path: str) -> None:
    with open(path, "a"):
        os.utime(path, None)


def _reap(folder: str, old: dict | None) -> None:
    """Under the folder's lock, before a new keeper starts: the state of a keeper that is provably gone (killed
    with -9, its pid reused since) removed with its private Ray folder. State of another host, boot or pid
    namespace is never in this folder (:func:`machine_dir`); a record that cannot be proven gone keeps its
    private folder (the new keeper's state replaces it)."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(_paths(folder)["state"])
    if old and old.get("machine") == namespace_key() and process_gone(old.get("process")):
        ray_temp.remove(old.get("temp_dir"))


def ensure(d: str | None = None, timeout_s: float = START_TIMEOUT_S) -> dict:
    """This machine's cluster, started if none is up (a new keeper); claims it for a run about to use it (the
    keeper will not stop it for :data:`GRACE_S` from now). Refused on a Ray without token authentication."""
    from pipeline.config import ConfigError
    from pipeline.execution.ray_cluster import installed_ray_version, keep_warm_ray_problem

    problem = keep_warm_ray_problem(installed_ray_version())
    if problem:
        raise ConfigError(problem)
    folder = machine_dir(d)
    p = _paths(folder)
    with _locked(folder):
        _touch(p["claim"])
        old = _load(folder)
        st = _live(old)
        if st is not None:
            why = answers(st["address"])
            if why is None:
                return st
            log.warning("this machine's warm workers' Ray does not answer (%s): stopping its keeper (pid %s) and "
                        "starting a new one", why, st.get("pid"))
            _end(st, STOP_WAIT_S)
        _reap(folder, old)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        with open(p["log"], "ab") as logf:
            proc = subprocess.Popen([sys.executable, "-m", "pipeline.execution.keeper", folder],
                                    stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=env, close_fds=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            st = _live(_load(folder))
            if st is not None and st.get("pid") == proc.pid:
                return st
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        if proc.poll() is None:
            proc.terminate()
            proc.wait()

        raise ConfigError(f"could not start this machine's Ray for warm workers (--keep-warm): see {p['log']}; "
                          "run without --keep-warm to start workers for this run only")


def fleet_actor_names(ray) -> list[str]:
    """The names of every fleet worker on the connected cluster (``fleet/NAME/I`` in :data:`NAMESPACE`)."""
    return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
            if a.get("namespace") == NAMESPACE and a["name"].startswith("fleet/")]


def _keep(folder: str) -> None:
    """The keeper: a local Ray head as this process's driver, stopped once no fleet worker is up for the grace."""
    p = _paths(folder)
    grace = float(os.environ.get(GRACE_ENV) or GRACE_S)
    stop: list = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    import secrets

    with open(os.open(p["token"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(secrets.token_hex(32))
    os.environ.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": p["token"]})
    private = ray_temp.new()  # mode 0700, a name nobody could take before
    try:
        _serve(folder, private, grace, stop)
    finally:
        if "ray" in sys.modules:  # (Ray's processes write to the folder until they are gone)
            sys.modules["ray"].shutdown()
        ray_temp.remove(private)


def _serve(folder: str, private: str, grace: float, stop: list) -> None:
    import ray

    from pipeline.execution import own_ray

    p = _paths(folder)
    # the head under a watchdog of its own (pipeline.execution.own_ray): a keeper killed with -9 takes every Ray
    # process with it, the raylet's agents included
    head = own_ray.start(private, token=p["token"])
    try:
        ray.init(address=head["address"], namespace=NAMESPACE, logging_level=logging.ERROR, log_to_driver=False)
        _watch_fleet(folder, private, grace, stop, head["group"])
    finally:
        ray.shutdown()
        own_ray.stop(head)


def _watch_fleet(folder: str, private: str, grace: float, stop: list, group: int) -> None:
    import ray

    p = _paths(folder)
    # ray.init sets a SIGTERM handler that exits at once: the keeper's own again, so that a stop (`mcprm fleet
    # down`) shuts Ray down and removes its folder
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    import socket

    st = {"pid": os.getpid(), "process": this_process(), "machine": namespace_key(), "host": socket.gethostname(),
          "address": ray.get_runtime_context().gcs_address, "temp_dir": private, "started_at": time.time(),
          "ray_group": group}
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
        with _locked(folder):
            claimed = os.path.getmtime(p["claim"]) if os.path.exists(p["claim"]) else 0.0
            if time.time() - max(last, claimed) > grace and not fleet_actor_names(ray):
                os.remove(p["state"])  # (under the lock: a run now starts a new keeper)
                break
    with _locked(folder):
        if (_load(folder) or {}).get("pid") == os.getpid():
            os.remove(p["state"])
    print(f"keeper {os.getpid()}: stopping Ray", flush=True)


def _end(st: dict, timeout_s: float) -> str:
    """Stop the keeper ``st`` (a running one: :func:`_live`): SIGTERM (it stops Ray and removes its folder), then,
    if it is not gone within ``timeout_s``, SIGKILL to its process group (it leads a session of its own; Ray's
    processes share its fate) and its private folder removed. Each signal only while its pid still names that
    process. Returns what was done."""
    pid = int(st["pid"])
    proc = st.get("process")

    def gone() -> bool:
        with contextlib.suppress(ChildProcessError):  # a keeper this very process started: reaped here
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        return not same_process(proc)

    if gone():
        return f"keeper {pid} was gone already"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not gone():
        time.sleep(0.2)
    if gone():
        ray_temp.remove(st.get("temp_dir"))  # (a keeper removes it itself as it stops: this is for one that could not)
        return f"stopped keeper {pid}"
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and not gone():
        time.sleep(0.1)
    ray_temp.remove(st.get("temp_dir"))
    return f"keeper {pid} did not stop within {timeout_s:g} s of SIGTERM: killed it and its processes"


def stop(d: str | None = None, timeout_s: float = STOP_WAIT_S) -> str | None:
    """Stop this machine's keeper (and its cluster) now, within about ``timeout_s`` (then it is killed); what was
    done, or None if none was running."""
    folder = machine_dir(d)
    st = running(d)
    if st is None:
        return None
    said = _end(st, timeout_s)
    with _locked(folder), contextlib.suppress(FileNotFoundError):
        if (_load(folder) or {}).get("process") == st.get("process"):
            os.remove(_paths(folder)["state"])
    return said


if __name__ == "__main__":  # pragma: no cover - run by ensure() in a process of its own
    _keep(sys.argv[1])
