"""The Ray cluster as the Ray executor sees it (:mod:`pipeline.execution.executors`): starting or joining it,
checking it can host the workers asked for (a clear error, or a visible wait, never a silent hang), and the
errors its tasks and actors raise, unwrapped into mcprm's own."""

from __future__ import annotations

import logging
import os
import time

from pipeline.config import ConfigError, LabelConfig
from pipeline.execution import ray_temp

log = logging.getLogger("mcprm")

# The oldest Ray mcprm runs on: the first with token authentication (RAY_AUTH_MODE=token), which keeps other users
# of a machine out of the Ray that holds its warm workers (pipeline.execution.keeper). pyproject.toml says the
# same; a Ray installed around it is refused where the token matters (keep_warm_ray_problem).
RAY_MIN_VERSION = (2, 52)
RAY_REQUIREMENT = "ray>=2.52"


def workers_fitting(total: float, each: float) -> int:
    """How many workers of ``each`` (GPUs or CPUs) ``total`` holds. Shares like 1/5 of a GPU are not exact in
    floating point (``1 // 0.2`` is 4.0), so the quotient is taken with a little slack."""
    return int(total / each + 1e-6) if each > 0 else 0


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def gpu_count() -> int:
    """GPUs this machine shows (device files or CUDA_VISIBLE_DEVICES), without importing torch."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return len([d for d in vis.split(",") if d.strip() and d.strip() != "-1"])
    import glob

    return len(glob.glob("/dev/nvidia[0-9]*"))


def installed_ray_version() -> str | None:
    """The installed Ray's version (without importing it: that takes seconds), or None when Ray is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ray")
    except PackageNotFoundError:
        return None


def keep_warm_ray_problem(found: str | None) -> str | None:
    """Why Ray version ``found`` cannot keep workers warm on this machine (None: it can)."""
    import re

    if found is None:
        return f"--keep-warm keeps workers on this machine's Ray, and Ray is not installed: pip install '{RAY_REQUIREMENT}'"
    nums = [int(x) for x in re.findall(r"\d+", found)[:2]]
    if tuple(nums) >= RAY_MIN_VERSION:
        return None
    return (f"--keep-warm needs Ray >= {'.'.join(map(str, RAY_MIN_VERSION))} (token authentication keeps other users "
            f"of this machine out of the Ray that holds the warm workers); Ray {found} is installed. Upgrade it "
            f"(pip install -U '{RAY_REQUIREMENT}') or run without --keep-warm")


PROBE_S = 5.0  # the longest wait for a Ray address to answer before it is joined
# HTTP/2's client preface and an empty SETTINGS frame: Ray's GCS (a gRPC server) answers with a SETTINGS frame
_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def answers(address: str, timeout_s: float = PROBE_S) -> str | None:
    """Why the Ray at ``address`` (``host:port`` of its GCS) does not answer within ``timeout_s``, or None when
    it does: a TCP connection and an HTTP/2 handshake, the first thing its gRPC server does. Ray itself retries an
    address that does not answer for minutes; this is asked first, so that nothing waits on a dead cluster."""
    import socket

    host, sep, port = str(address).rpartition(":")
    if not sep or not port.isdigit():
        return None  # not host:port: left to Ray
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as s:
            s.sendall(_H2_HELLO)
            got = b""
            while len(got) < 9:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                s.settimeout(left)
                chunk = s.recv(9 - len(got))
                if not chunk:
                    return f"the Ray at {address} closed the connection without answering"
                got += chunk
    except TimeoutError:
        return f"nothing answered at {address} within {timeout_s:g} s"
    except OSError as e:
        return f"nothing answers at {address} ({e.strerror or e})"
    if got[3] != 0x4:
        return f"what answers at {address} is not a Ray cluster (no HTTP/2 handshake)"
    return None


def accepts(address: str, timeout_s: float = PROBE_S) -> str | None:
    """Why the Ray at ``address`` does not answer Ray's own first call (its cluster id) within ``timeout_s``, or
    None when it does. A GCS that answers the handshake (:func:`answers`) but hangs after it would make
    ``ray.init`` retry for many minutes; this bounded call is made first (with this process's token set)."""
    host, sep, port = str(address).rpartition(":")
    if not sep or not port.isdigit():
        return None  # not host:port: left to Ray
    import ray._raylet
    from ray.exceptions import AuthenticationError

    try:
        ray._raylet.InnerGcsClient.standalone(str(address), None, int(timeout_s * 1000))
    except AuthenticationError:
        return None  # it answered (refused this process's token): ray.init says so, with what to do
    except Exception as e:  # noqa: BLE001 - Ray's RpcError (deadline exceeded, unavailable)
        return f"the Ray at {address} answered its handshake but not Ray's first call within {timeout_s:g} s ({e})"
    return None


_OWN: dict = {}  # this process's own Ray (pipeline.execution.own_ray), once started: its head and folder


def init_ray(address: str | None = None, log_to_driver: bool = False) -> None:
    """Connect this process to Ray: the cluster at ``address`` (or ``RAY_ADDRESS``), else a Ray of its own
    (:mod:`pipeline.execution.own_ray`: its head in a process group of its own that nothing outlives, its files in
    a private folder), started once and joined again after a ``ray.shutdown()``."""
    from rollouts.base import require

    ray = require("ray", f"pip install '{RAY_REQUIREMENT}'")
    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is None:
        # a Ray of our own: a bare ray.init() joins any cluster this machine's last `ray start` (or another job's
        # test cluster) left in /tmp/ray, whose resources are not ours, and leaves a world-writable session folder
        # there; the head's files go to a folder of this process's own instead
        if not _OWN or _OWN["head"]["watchdog"].poll() is not None:
            _start_own_ray()
        address = _OWN["head"]["address"]
        use_token(_OWN["head"]["auth"])
    elif "://" not in address:  # (ray://...: Ray Client's, left to Ray)
        why = answers(address) or accepts(address)
        if why is not None:
            raise ConfigError(f"no Ray cluster answers at {address} ({why}): check --ray-address / RAY_ADDRESS "
                              "(`ray status` on the head prints it), or start one with `ray start --head`")
    # Let actors find the top-level packages (pipeline, rollouts, graders) when running from a checkout.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {"env_vars": {"PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}}
    # Ray's own log lines (workers' output, ANSI colour) stay out of the user's terminal unless asked (-v).
    ray.init(address=address, runtime_env=env, ignore_reinit_error=True, log_to_driver=log_to_driver,
             logging_level=logging.WARNING if log_to_driver else logging.ERROR)


def use_token(auth: dict[str, str]) -> None:
    """Set Ray's token authentication variables ``auth`` in this process (Ray reads its mode into a cached config:
    refreshed here, as Ray's own ``_enable_token_auth`` does)."""
    os.environ.update(auth)
    refresh_ray_config()


def refresh_ray_config() -> None:
    import sys

    if "ray" in sys.modules:
        from ray._raylet import Config

        Config.initialize("")
        # the token Ray read is cached apart from the mode: dropped too (after the mode, as Ray's own test helper
        # does), or a Ray this process starts later, with the variables gone, is asked for the old token
        try:
            from ray._raylet import AuthenticationTokenLoader
        except ImportError:  # a Ray without token authentication: nothing cached
            return
        AuthenticationTokenLoader.instance().reset_cache()


def _start_own_ray() -> None:
    from pipeline.execution import own_ray

    folder = ray_temp.new()
    try:
        head = own_ray.start(folder)
    except BaseException:
        ray_temp.remove(folder)
        raise
    if not _OWN:
        import atexit

        atexit.register(_end_own_ray)
    _OWN.update(head=head, folder=folder)


def own_ray_head() -> dict | None:
    """This process's own Ray's head (``address``, ``group``: the process group of its processes), if started."""
    return {k: v for k, v in _OWN["head"].items() if k != "watchdog"} if _OWN else None


def _end_own_ray() -> None:
    """At exit of a process that started a Ray of its own: disconnected, then its head ended (its watchdog kills
    the head's process group and removes its folder; a driver killed with -9 closes the watchdog's pipe just the
    same) and its folder removed."""
    import sys

    ray = sys.modules.get("ray")
    try:
        if ray is not None and ray.is_initialized():
            ray.shutdown()
    finally:
        from pipeline.execution import own_ray

        own_ray.stop(_OWN.get("head"))
        ray_temp.remove(_OWN.get("folder"))


class ResourceError(ConfigError):
    """The cluster cannot run the workers asked for (no GPU, too few CPUs): said at once, never a silent hang."""


def cluster_summary(ray) -> str:
    res = ray.cluster_resources()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return (f"{len(nodes)} node(s) with {res.get('CPU', 0):g} CPU(s) and {res.get('GPU', 0):g} GPU(s) in all"
            + (f", {res.get('GPU', 0) - ray.available_resources().get('GPU', 0):g} GPU(s) in use"
               if res.get("GPU") else ""))


def check_resources(ray, cfg: LabelConfig, n: int, cpus: float, gpus: float, poll_s: float = 5.0) -> None:
    """Fail fast (or, with ``cfg.wait_for_resources`` seconds, wait with a visible message) when the cluster
    cannot host ``n`` actors of ``cpus`` CPUs and ``gpus`` GPUs each; Ray itself would wait forever."""

    def short() -> str | None:
        res = ray.cluster_resources()
        nodes = [nd.get("Resources", {}) for nd in ray.nodes() if nd.get("Alive")]
        fits_one = any(r.get("CPU", 0) >= cpus and r.get("GPU", 0) + 1e-6 >= gpus for r in nodes)
        if gpus > 0 and workers_fitting(res.get("GPU", 0), gpus) < n or not fits_one and gpus > 0:
            return f"{n} worker(s) with {gpus:g} GPU(s) each ({gpus * n:g} GPUs)"
        if res.get("CPU", 0) < cpus * n or not fits_one:
            return f"{n} worker(s) with {cpus:g} CPU(s) each ({cpus * n:g} CPUs)"
        return None

    asked = short()
    if asked is None:
        return
    deadline = time.monotonic() + max(0.0, float(cfg.wait_for_resources or 0))
    while asked is not None and time.monotonic() < deadline:
        log.warning("waiting for resources: asked for %s; the cluster has %s (giving up in %.0f s)", asked,
                    cluster_summary(ray), deadline - time.monotonic())
        time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
        asked = short()
    if asked is None:
        return
    what = (["run on a machine or cluster with GPUs (--ray-address ADDRESS)",
             "use --backend hf (CPU) or --backend openai --base-url URL (a running server)"]
            if gpus > 0 else ["use fewer workers (--num-workers N) or fewer CPUs each (--cpus-per-worker C)"])
    what.append("on an autoscaling cluster, pass --wait-for-resources SECONDS to wait for nodes")
    waited = f" (waited {cfg.wait_for_resources:g} s)" if cfg.wait_for_resources else ""
    raise ResourceError(f"the Ray cluster cannot run this job{waited}: it asks for {asked}, and the cluster has "
                        f"{cluster_summary(ray)}. To fix: " + "; or ".join(what) + ".")


def task_cause(e) -> BaseException:
    """The exception to raise for a ``ray.exceptions.RayTaskError`` ``e`` (Ray's wrapping, whose text is the
    whole remote traceback): the task's own exception where its message says it all (mcprm's errors, a
    :class:`pipeline.execution.shard_worker.WorkerError` keeping the worker's traceback itself; storage errors;
    a missing dependency), anything else as a :class:`pipeline.errors.RemoteTaskError` carrying the worker's
    traceback; raise it ``from e``."""
    from pipeline.errors import McprmError, RemoteTaskError
    from rollouts.base import MissingDependency

    if isinstance(e.cause, McprmError | OSError | MissingDependency):
        return e.cause
    try:
        detail = e.traceback_str
    except AttributeError:  # Ray's class for a cause type (RayTaskError(ValueError)) may not carry it
        detail = str(e)  # Ray's text: the worker's whole traceback
    return RemoteTaskError(e.cause, detail)


def cpus_per_gpu(ray) -> float | None:
    """The fewest CPUs per GPU of any live GPU node (what a GPU worker can be given everywhere)."""
    per = [n["Resources"].get("CPU", 0) / n["Resources"]["GPU"] for n in ray.nodes()
           if n.get("Alive") and n.get("Resources", {}).get("GPU")]
    return min(per) if per else None


def worker_shape(ray, cfg: LabelConfig, shards_hint: int | None = None) -> tuple[int, float, float]:
    """(workers, CPUs each, GPUs each) for ``cfg`` on the connected cluster: ``--num-workers``, else as many as
    its GPUs (a GPU backend) or CPUs hold, at most ``shards_hint``."""
    gpus = cfg.worker_gpus
    cpus = cfg.worker_cpus(cpus_per_gpu(ray) if gpus > 0 else None)
    n = cfg.num_workers
    if n is None:
        res = ray.cluster_resources()
        n = workers_fitting(res.get("GPU", 0), gpus) if gpus > 0 else int(res.get("CPU", 1) // max(cpus, 1e-9))
        n = max(1, min(n, shards_hint or n))
    return n, cpus, gpus


def init_error(e: BaseException) -> BaseException:
    """A worker whose backend could not be built (bad model path, out of GPU memory): the error it raised, as one
    message (Ray's text holds the whole remote traceback, kept as ``detail``)."""
    from pipeline.execution.shard_worker import WorkerError

    text = str(e)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    last = next((ln for ln in reversed(lines) if not ln.startswith(("File ", "^", "~")) and ":" in ln), "")
    what = (last or (lines[-1] if lines else text)).rstrip(".")
    return WorkerError(f"a Ray worker could not start its backend: {what}. "
                       "Check --model, --backend and the worker's resources (MCPRM_DEBUG=1 shows the traceback).",
                       text)
