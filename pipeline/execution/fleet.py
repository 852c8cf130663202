"""A warm fleet: rollout workers kept loaded on a running Ray cluster between runs, so that a scheduled refresh
starts no engine at all.

``mcprm fleet up`` starts named **detached** actors (:class:`_FleetActor`, a :class:`_ShardActor` that also keeps a
lease and an idle timer) in the Ray namespace :data:`NAMESPACE`, named ``fleet/<name>/<i>``, each with its backend
built, and returns. ``mcprm label --fleet NAME`` borrows them (:func:`borrow_fleet`, a :class:`FleetExecutor`):

- only when the fleet's **engine identity** (:func:`engine_identity`: the backend, the ``ModelRef`` -- model,
  tokenizer, dtype, seed -- and the backend's options section, exactly what a worker's engine is built from and what
  ``ShardWorker.use`` refuses to change) equals the run's; else a :class:`FleetError` naming each option that differs;
- one run per worker at a time: a run takes a **lease** on each worker it uses (the free ones, up to
  ``--num-workers``; :mod:`pipeline.execution.leases`), which lapses if its run dies; a worker labels only its
  leaseholder's shards, and a run that finds no free worker stops at once with an error naming the runs that hold
  them;
- the run never kills the workers: closing it releases its leases.

Each worker stops itself once it has been idle (no lease, no shard) for its ``--keep-warm`` (a thread in the actor:
nothing runs on the driver). ``mcprm fleet down`` stops a fleet at once. Only this module (and the executors and
ray_cluster modules) import ray, inside the functions that need it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from typing import Any

from pipeline.config import ConfigError, LabelConfig, option_fields
from pipeline.execution import local_head
from pipeline.execution.executors import RayExecutor, _ShardActor, worker_shape
from pipeline.execution.leases import CONTROL, LEASE_TTL_S, Leases, control, holder_gone, this_holder
from pipeline.execution.local_head import NAMESPACE
from pipeline.execution.ray_cluster import RAY_REQUIREMENT, check_resources, init_error, init_ray, task_cause
from pipeline.options import parse_duration
from rollouts.registry import ModelRef

log = logging.getLogger("mcprm")


class FleetError(ConfigError):
    """A fleet that cannot serve this run (none up, another engine, every worker busy): says what to do."""


def actor_name(fleet: str, index: int) -> str:
    return f"fleet/{fleet}/{index}"


# ---------------------------------------------------------------------------------------------- engine identity
def engine_identity(cfg: LabelConfig) -> dict[str, Any]:
    """What a worker's engine is built from (``build_backend``: the ``ModelRef`` and the backend's options section),
    flat: the fields ``ShardWorker.use`` compares before it labels another run's shards with a built backend. A local
    model folder is named by its absolute path; a secret (the API key) by a digest of it."""
    import hashlib

    out: dict[str, Any] = {"backend": cfg.backend}
    for k, v in dataclasses.asdict(cfg.model_ref()).items():
        out[k] = os.path.abspath(v) if k in ("model", "tokenizer") and v and os.path.isdir(v) else v
    fields = option_fields()
    for k, v in dataclasses.asdict(cfg.backend_options).items():
        secret = fields[k][0].metadata.get("secret") if k in fields else False
        out[k] = ("sha256:" + hashlib.sha256(str(v).encode()).hexdigest()[:12]) if secret and v else v
    return out


def _spelled(name: str) -> str:
    f = option_fields().get(name)
    if f is not None and not f[0].metadata.get("cli", True):
        return f"{name} (run file)"
    return "--" + name.replace("_", "-")


def engine_diff(fleet: dict, run: dict) -> list[str]:
    """Each engine option that differs, as ``--seed: the fleet's 0, this run's 1`` (another backend: that and the
    model's fields, not the options of two different backends)."""
    keys = sorted(set(fleet) | set(run))
    if fleet.get("backend") != run.get("backend"):
        keys = ["backend"] + [f.name for f in dataclasses.fields(ModelRef)]
    return [f"{_spelled(k)}: the fleet's {fleet.get(k)!r}, this run's {run.get(k)!r}"
            for k in keys if fleet.get(k) != run.get(k)]


# ---------------------------------------------------------------------------------------------- the actor
class _FleetActor(_ShardActor):
    """A :class:`_ShardActor` kept warm between runs: a lease (one run at a time) and an idle timer (it stops
    itself after ``keep_warm_s`` with no lease and no shard)."""

    def __init__(self, cfg: LabelConfig, cpus: float, info: dict):
        super().__init__(cfg, cpus)
        self.info = dict(info)
        born = self.info.pop("lease", None)  # started by a run for itself (pipeline.execution.kept): its lease
        self.lease: dict | None = None  # run, holder (host, pid, output), since, until
        if born:
            self.lease = {**born, "since": time.time(), "until": time.time() + LEASE_TTL_S}
        self.busy = 0
        self.idle_since = time.time()
        self.runs_served, self.shards_served = int(bool(born)), 0
        self.stopping = False  # past its keep-warm: no more leases
        self._lock = threading.Lock()
        threading.Thread(target=self._watch, daemon=True, name="mcprm-fleet-idle").start()

    # ---- lease (the control group: answered while shards are labeled)
    def acquire(self, run: str, holder: dict, ttl: float, now: float | None = None,
                replace: str | None = None) -> dict | None:
        """Take or renew the lease for ``run``: None when it holds it now, else the lease that holds the worker.
        (A lease left without its run -- the actor restarted under a run -- is taken back by that run's output.)
        ``replace``: the run of a lease whose holder the caller found gone (a process of its own machine that no
        longer exists, :func:`pipeline.execution.leases.holder_gone`): taken over at once, not after it lapses."""
        now = time.time() if now is None else now
        with self._lock:
            self._lapse(now)
            if self.stopping:
                return {"stopping": True}
            if replace is not None and self.lease is not None and self.lease["run"] == replace:
                log.warning("the lease of run %s (%s) is taken over: its process is gone", replace,
                            self.lease["holder"])
                self.lease = None
            held = self.lease
            if held is not None and held["run"] != run and (held["run"] is not None
                                                           or held["holder"].get("output") != holder.get("output")):
                return dict(held)
            if held is None or held["run"] is None:
                self.runs_served += held is None
                self.lease = {"run": run, "holder": dict(holder), "since": now, "until": now + ttl}
            else:
                held["until"] = now + ttl
            return None

    def release(self, run: str, keep_warm_s: float | None = None) -> None:
        with self._lock:
            if self.lease is not None and self.lease["run"] == run:
                self.lease = None
                self.idle_since = time.time()
            if keep_warm_s:
                self.info["keep_warm_s"] = float(keep_warm_s)

    def _lapse(self, now: float) -> None:
        if self.lease is not None and self.lease["until"] < now:
            log.warning("the lease of run %s (%s) lapsed: its driver stopped renewing it", self.lease["run"],
                        self.lease["holder"])
            self.lease = None
            self.idle_since = now

    def status(self) -> dict:
        import ray

        with self._lock:
            self._lapse(time.time())
            lease = dict(self.lease) if self.lease else None
            idle = None if lease or self.busy else self.idle_since
            return {**self.info, "pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(),
                    "started_at": self.started[0], "ready_at": self.started[1],
                    "engine_start_s": self.started[1] - self.started[0], "lease": lease, "busy": self.busy,
                    "idle_since": idle, "expires_at": None if idle is None else idle + self.info["keep_warm_s"],
                    "runs_served": self.runs_served, "shards_served": self.shards_served}

    def _watch(self) -> None:
        """Stop this actor (for good: no restart) once idle for its keep-warm time."""
        while True:
            with self._lock:
                now = time.time()
                self._lapse(now)
                left = (self.idle_since + self.info["keep_warm_s"] - now) if not (self.lease or self.busy) else None
                if left is not None and left <= 0:
                    self.stopping = True  # (under the lock: no lease and no shard is taken from now on)
                    break
            time.sleep(min(5.0, max(0.05, left if left is not None else 5.0)))
        import ray

        log.warning("fleet %s worker %s idle for %.0f s: stopping", self.info["fleet"], self.info["index"],
                    self.info["keep_warm_s"])
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    # ---- labeling: only the leaseholder's shards
    def process(self, version: int, shard: int, solutions, cfg: LabelConfig | None = None) -> dict:
        with self._lock:
            now = time.time()
            self._lapse(now)
            if self.stopping:
                raise FleetError(f"fleet {self.info['fleet']!r} is stopping (idle past its --keep-warm); rerun the "
                                 "command after `mcprm fleet up`, or without --fleet")
            if self.lease is None and cfg is not None:  # restarted under a run: held for it until it renews
                self.lease = {"run": None, "holder": {"output": cfg.output}, "since": now, "until": now + LEASE_TTL_S}
            lease = self.lease
            if cfg is None or lease is None or lease["holder"].get("output") != cfg.output:
                holder = lease["holder"] if lease else None
                raise FleetError(f"fleet {self.info['fleet']!r} worker {self.info['index']} labels only the shards "
                                 f"of the run that leased it ({holder or 'none now'}); rerun the command to "
                                 "borrow it again")
            self.busy += 1
        try:
            return super().process(version, shard, solutions, cfg)
        finally:
            with self._lock:
                self.busy -= 1
                self.shards_served += 1
                self.idle_since = time.time()


# ---------------------------------------------------------------------------------------------- the driver side
def connect(cfg: LabelConfig):
    """Ray, connected to the cluster a fleet lives on (``--ray-address`` or ``RAY_ADDRESS``: never a Ray of this
    process's own, whose actors would end with it)."""
    from rollouts.base import require

    ray = require("ray", f"pip install '{RAY_REQUIREMENT}'")
    address = cfg.ray_address or os.environ.get("RAY_ADDRESS")
    if not address or address == "local":
        st = local_head.running()  # this machine's warm workers (pipeline.execution.kept)
        if st is None:
            raise FleetError("a fleet lives on a running Ray cluster: start one (`ray start --head`) and pass its "
                             "address with --ray-address ADDRESS (or set RAY_ADDRESS); no warm workers are kept "
                             "on this machine (--keep-warm) either")
        why = local_head.answers(st["address"])
        if why is not None:
            raise FleetError(f"this machine's warm workers' Ray does not answer ({why}): stop it with `mcprm "
                             "fleet down` (it stops its keeper without joining it)")
        local_head.use_auth()
        address = st["address"]
    _reachable(address)
    if ray.is_initialized():  # (init_ray keeps a connection): the fleet must be looked for where it was asked
        have = ray.get_runtime_context().gcs_address
        if ":" in address and "://" not in address and have != address:
            raise FleetError(f"this process is connected to the Ray cluster at {have}, not {address}: look for the "
                             "fleet from a process of its own (the mcprm command), or call ray.shutdown() first")
    init_ray(address, log_to_driver=cfg.ray_logs)
    return ray


def _reachable(address: str, timeout_s: float = 5.0) -> None:
    """A ``host:port`` address nothing answers at is said at once (Ray itself retries it for minutes)."""
    import socket

    host, sep, port = address.rpartition(":")
    if "://" in address or not sep or not port.isdigit():
        return  # ray://..., auto: left to Ray
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise FleetError(f"no Ray cluster answers at {address} ({e.strerror or e}): check --ray-address / RAY_ADDRESS "
                         "(`ray status` on the head prints it), or start one with `ray start --head`") from None


def fleet_names(ray) -> dict[str, list[int]]:
    """Each fleet on the cluster: its name and its live workers' indices."""
    out: dict[str, list[int]] = {}
    for name in local_head.fleet_actor_names(ray):
        parts = name.split("/")
        if len(parts) == 3 and parts[2].isdigit():
            out.setdefault(parts[1], []).append(int(parts[2]))
    return {k: sorted(v) for k, v in sorted(out.items())}


def fleet_status(ray, name: str) -> list[tuple[Any, dict]]:
    """(handle, status) of each live worker of fleet ``name``, in index order (one that stops meanwhile is left out)."""
    out = []
    for i in fleet_names(ray).get(name, []):
        try:
            h = ray.get_actor(actor_name(name, i), namespace=NAMESPACE)
            out.append((h, ray.get(control(h, "status"), timeout=60)))
        except Exception as e:  # noqa: BLE001 - stopped (expired, taken down) between the listing and the call
            log.debug("fleet %s worker %d: %s", name, i, e)
    return out


def fleet_cfg(cfg: LabelConfig) -> LabelConfig:
    """``cfg`` as a fleet's workers are built from it: resolved, a model folder by its full path (the workers may
    start anywhere, and serve runs started from anywhere)."""
    cfg = cfg.resolved()
    return cfg.replace(model=os.path.abspath(cfg.model)) if cfg.model and os.path.isdir(cfg.model) else cfg


def fleet_actor_class(ray, cfg: LabelConfig, cpus: float, gpus: float):
    """The Ray actor class of a fleet's workers (restarted if they die; leases and status in their own group)."""
    return ray.remote(num_cpus=cpus, num_gpus=gpus, max_restarts=-1, max_task_retries=0,
                      max_concurrency=cfg.worker_shards, concurrency_groups={CONTROL: 2})(_FleetActor)


def fleet_info(cfg: LabelConfig, name: str, size: int, keep_warm_s: float, cpus: float, gpus: float) -> dict:
    """What every worker of fleet ``name`` knows of it (its status; ``engine``: what borrowing runs must match)."""
    return {"fleet": name, "size": size, "engine": engine_identity(cfg), "model_ref": [cfg.model, cfg.tokenizer],
            "keep_warm_s": float(keep_warm_s), "cpus": cpus, "gpus": gpus, "created_at": time.time()}


def start_fleet(cfg: LabelConfig, name: str, keep_warm_s: float) -> list[dict]:
    """Start fleet ``name``'s workers for ``cfg``'s engine, wait until each has built its backend, return their
    status. Refused when a fleet of that name is up."""
    ray = connect(cfg)
    cfg = fleet_cfg(cfg)
    if fleet_names(ray).get(name):
        raise FleetError(f"a fleet named {name!r} is up already (`mcprm fleet status --fleet {name}`): take it down "
                         f"first (`mcprm fleet down --fleet {name}`) or name another with --fleet NAME")
    n, cpus, gpus = worker_shape(ray, cfg)
    check_resources(ray, cfg, n, cpus, gpus)
    cls = fleet_actor_class(ray, cfg, cpus, gpus)
    info = fleet_info(cfg, name, n, keep_warm_s, cpus, gpus)
    actors = []
    try:
        for i in range(n):
            actors.append(cls.options(name=actor_name(name, i), namespace=NAMESPACE, lifetime="detached")
                          .remote(cfg, cpus, dict(info, index=i)))
        ray.get([a.ready.remote() for a in actors])
        return [ray.get(control(a, "status")) for a in actors]
    except BaseException as e:
        for a in actors:
            ray.kill(a, no_restart=True)
        if isinstance(e, ValueError) and "already" in str(e):  # another `fleet up` of that name at the same time
            raise FleetError(f"a fleet named {name!r} was started by another command meanwhile") from None
        if getattr(e, "actor_init_failed", False):
            raise init_error(e) from None
        if isinstance(e, ray.exceptions.RayTaskError):
            raise task_cause(e) from e
        raise


def stop_fleet(ray, name: str, force: bool = False) -> int:
    """Stop fleet ``name``'s workers (for good); refused while a run holds one, unless ``force``."""
    workers = fleet_status(ray, name)
    busy = [st["lease"]["holder"] for _, st in workers if st["lease"]]
    if busy and not force:
        raise FleetError(f"fleet {name!r} is serving {len(busy)} run(s) ({busy[0]}); wait for them to finish, or "
                         "pass --force to stop it anyway (those runs fail; rerunning them resumes)")
    for h, _ in workers:
        ray.kill(h, no_restart=True)
    return len(workers)


class FleetExecutor(Leases, RayExecutor):
    """A warm fleet's workers leased to one run: a :class:`RayExecutor` over them that starts no actor (they are
    up: ``startup_seconds`` is 0) and whose ``close`` releases the leases instead of killing the actors."""

    def __init__(self, ray, cfg: LabelConfig, name: str, leased: list[tuple[Any, dict]], run: str, holder: dict,
                 borrow_seconds: float):
        self.ray, self.fleet, self.run_id, self.holder = ray, name, run, holder
        self.source = f"--fleet {name}"  # how the run came to borrow it (the manifest's reason)
        self._track([h for h, _ in leased], None)  # None: every shard goes with its run's own settings
        self.status0 = [st for _, st in leased]
        for i, st in enumerate(self.status0):  # up already: the run starts on them at once
            self._node_of[i] = st["node"]
            self.actor_start[i] = (st["started_at"], st["ready_at"])
            self.ready_at[i] = time.time()
        self.cpus_per_worker, self.gpus_per_worker = self.status0[0]["cpus"], self.status0[0]["gpus"]
        self.model_ref = self.status0[0]["model_ref"]
        self.keep_warm_s = parse_duration(cfg.keep_warm) if cfg.keep_warm else None
        self.borrow_seconds = borrow_seconds
        self.stats0 = [ray.get(control(h, "backend_stats"), timeout=60) for h, _ in leased]  # counters before this run
        self._start_renewing()

    def run(self, version, shards, on_done, cfg: LabelConfig | None = None) -> None:
        if cfg is not None:  # the fleet's own spelling of the model (its engine identity matched this run's)
            cfg = cfg.replace(model=self.model_ref[0], tokenizer=self.model_ref[1])
        super().run(version, shards, on_done, cfg)

    ADDITIVE = ("requests", "samples", "prompt_tokens", "generated_tokens", "cached_prompt_tokens", "generate_seconds",
                "prefix_cache_queries")

    def backend_stats(self) -> list[dict]:
        """Each worker's backend counters for this run only: what they count now less what they counted when the run
        borrowed them (a warm worker's counters run over all the runs it served; one restarted since: all of it)."""
        out = []
        for a, was in zip(self.actors, self.stats0):
            try:
                now = self.ray.get(control(a, "backend_stats"), timeout=30)
            except Exception as e:  # noqa: BLE001 - a worker gone: its counters are lost, not the labels
                log.warning("could not read a fleet worker's backend counters: %s", e)
                continue
            d = dict(now)
            for k in self.ADDITIVE:
                if isinstance(now.get(k), (int, float)) and isinstance(was.get(k), (int, float)) and now[k] >= was[k]:
                    d[k] = round(now[k] - was[k], 3)
            out.append(d)
        return out

    def manifest_entry(self) -> dict:
        """What the manifest's ``execution.fleet`` says: the fleet borrowed, its workers' pids and engine starts
        (made at ``fleet up``, none by this run), the time the borrowing took."""
        return {"name": self.fleet, "borrowed": True, "workers": len(self.actors),
                "pids": [st["pid"] for st in self.status0], "borrow_seconds": round(self.borrow_seconds, 3),
                "engine_started_at": [st["ready_at"] for st in self.status0],
                "fleet_engine_start_seconds": [round(st["engine_start_s"], 3) for st in self.status0],
                "reason": f"{self.source}: borrowed {len(self.actors)} warm worker(s) of the fleet, no engine "
                          f"start (borrowed in {self.borrow_seconds:.1f} s)"}


def borrow_fleet(cfg: LabelConfig) -> FleetExecutor:
    """Lease the free workers of fleet ``cfg.fleet`` (up to ``--num-workers``) for one run of ``cfg``."""
    t0 = time.perf_counter()
    ray = connect(cfg)
    name = cfg.fleet
    workers = fleet_status(ray, name)
    if not workers:
        up = ", ".join(fleet_names(ray)) or "none"
        raise FleetError(f"no fleet named {name!r} is up on the Ray cluster (fleets up: {up}): it was never started, "
                         "was taken down or stopped after its --keep-warm. Start it with `mcprm fleet up --fleet "
                         f"{name}` and this run's engine options, or leave out --fleet to start workers for this run")
    diff = engine_diff(workers[0][1]["engine"], engine_identity(cfg))
    if diff:
        raise FleetError(f"fleet {name!r} runs another engine than this run asks for: {'; '.join(diff)}. Run with "
                         "the fleet's options, start a fleet for these (`mcprm fleet up --fleet OTHER ...` with this "
                         "run's engine options, then --fleet OTHER), or leave out --fleet to start workers for this "
                         "run")
    return lease_workers(ray, cfg, name, workers, t0)


def lease_workers(ray, cfg: LabelConfig, name: str, workers: list[tuple[Any, dict]], t0: float) -> FleetExecutor:
    """Lease the free ones of ``workers`` (fleet ``name``'s, running ``cfg``'s engine), up to ``--num-workers``."""
    import uuid

    want = cfg.num_workers or len(workers)
    run = uuid.uuid4().hex[:12]
    holder = this_holder(cfg.output)
    leased, held = [], []
    for h, st in workers:
        if len(leased) == want:
            break
        other = ray.get(control(h, "acquire", run, holder, LEASE_TTL_S))
        if other is not None and other.get("run") and holder_gone(other.get("holder") or {}):
            other = ray.get(control(h, "acquire", run, holder, LEASE_TTL_S, None, other["run"]))
        if other is None:
            leased.append((h, st))
        elif not other.get("stopping"):
            held.append(other)
    if not leased and not held:
        raise FleetError(f"fleet {name!r} is stopping (idle past its --keep-warm): start it again with `mcprm fleet "
                         f"up --fleet {name}`, or leave out --fleet")
    if not leased:
        who = "; ".join(f"{o['holder'].get('output')} (pid {o['holder'].get('pid')} on {o['holder'].get('host')})"
                        for o in held[:3])
        raise FleetError(f"every worker of fleet {name!r} is serving another run ({who}); a worker serves one run at "
                         "a time. Wait for it to finish, start another fleet, or leave out --fleet")
    if len(leased) < want:
        log.warning("fleet %s has %d worker(s), %d of them serving other runs: this run uses %d (--num-workers %d)",
                    name, len(workers), len(held), len(leased), want)
    return FleetExecutor(ray, cfg, name, leased, run, holder, time.perf_counter() - t0)
