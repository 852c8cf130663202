"""Warm workers: rollout workers kept loaded between runs, so that a run (a scheduled refresh, the next `label`)
starts no engine. One mechanism, two places it lives:

- a **fleet** on a running Ray cluster: ``mcprm fleet up`` starts named **detached** actors (:class:`FleetActor`)
  in the Ray namespace :data:`NAMESPACE`, named ``fleet/<name>/<i>``, each with its backend built, and returns;
  ``mcprm label --fleet NAME`` borrows them (:func:`borrow_fleet`);
- this machine's fleet :data:`LOCAL_FLEET`, on the Ray of this machine's keeper (:mod:`pipeline.execution.keeper`):
  a run asked to keep its workers (``--keep-warm DURATION``, or ``keep_warm`` in its run file; off by default:
  :data:`pipeline.options.DEFAULT_LOCAL_KEEP_WARM`) starts them as that fleet (:func:`run_workers`), and the next
  such run with the same engine borrows them (:func:`local_fleet`); idle ones of another engine are stopped first.

Either way a run uses a fleet's workers through :class:`FleetWorkers`, the worker factory of a
:class:`pipeline.execution.executors.RayExecutor`:

- only when the fleet's **engine identity** (:func:`engine_identity`: the backend, the ``ModelRef`` -- model,
  tokenizer, dtype, seed -- and the backend's options section, exactly what a worker's engine is built from and what
  ``ShardWorker.use`` refuses to change) equals the run's; else a :class:`FleetError` naming each option that differs;
- one run per worker at a time: a run takes a **lease** on each worker it uses (renewed every :data:`RENEW_S`,
  lapsing :data:`LEASE_TTL_S` after its last renewal, so a run killed with -9 frees its workers by itself; a holder
  of this machine whose process is provably gone, :func:`holder_gone`, is taken over at once); a worker labels only
  its leaseholder's shards, and a run that finds no free worker stops at once with an error naming the runs that
  hold them;
- the run never kills the workers: closing it releases its leases.

Each worker stops itself once it has been idle (no lease, no shard) for its keep-warm (a thread in the actor:
nothing runs on the driver); the keeper then stops this machine's Ray. ``mcprm fleet down`` stops a fleet at once
(:func:`stop_fleet`; this machine's, with its Ray: :func:`stop_local`). However a run that keeps workers ends, it
says what it leaves running, until when, and the command that stops it (:func:`kept_notice`). A run that keeps
nothing and needs GPUs stops this machine's idle warm workers first (:func:`free_local_workers`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import socket
import threading
import time
from typing import Any

from pipeline.config import ConfigError, LabelConfig, option_fields
from pipeline.execution import keeper
from pipeline.execution.keeper import NAMESPACE
from pipeline.execution.ray_cluster import (
    RAY_REQUIREMENT,
    accepts,
    answers,
    check_resources,
    gpu_count,
    init_error,
    init_ray,
    task_cause,
    worker_shape,
)
from pipeline.execution.workers import OwnWorkers, ShardActor
from pipeline.options import DEFAULT_LOCAL_KEEP_WARM, parse_duration, parse_keep_warm
from pipeline.processes import namespace_key, process_gone, this_process
from rollouts.base import ENGINE_SAMPLE_KEYS
from rollouts.registry import ModelRef

log = logging.getLogger("mcprm")

LOCAL_FLEET = "local"  # the fleet name of the workers kept on this machine
LEASE_TTL_S = 60.0  # a run's lease on a worker lapses this long after its last renewal
RENEW_S = 10.0  # how often a run renews its leases
CONTROL = "control"  # the actors' concurrency group for leases and status: answered while a shard is labeled
CALL_WAIT_S = 60.0  # the longest wait for a fleet worker to answer a lease or status call
STOP_WORKERS_S = 60.0  # `mcprm fleet down`: the longest wait for this machine's warm workers to be gone


class FleetError(ConfigError):
    """A fleet that cannot serve this run (none up, another engine, every worker busy): says what to do."""


def actor_name(fleet: str, index: int) -> str:
    return f"fleet/{fleet}/{index}"


def control(handle, method: str, *args):
    """Call ``method`` of a fleet worker in its control group (answered while it labels a shard)."""
    return getattr(handle, method).options(concurrency_group=CONTROL).remote(*args)


def this_holder(output: str) -> dict:
    """Who holds a lease: this process (host; machine: host, boot and pid namespace; pid and start time) for a run
    writing ``output``."""
    return {"host": socket.gethostname(), "machine": namespace_key(), "pid": os.getpid(),
            "process": this_process(), "output": output}


def holder_gone(holder: dict) -> bool:
    """Whether a lease's holder is provably gone: a process of this host, boot and pid namespace whose pid no
    longer names it (gone, or reused by a process started since). A holder in another container is never."""
    return holder.get("machine") == namespace_key() and process_gone(holder.get("process"))


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


def fleet_cfg(cfg: LabelConfig) -> LabelConfig:
    """``cfg`` as a fleet's workers are built from it: resolved, a model folder by its full path (the workers may
    start anywhere, and serve runs started from anywhere)."""
    cfg = cfg.resolved()
    return cfg.replace(model=os.path.abspath(cfg.model)) if cfg.model and os.path.isdir(cfg.model) else cfg


# ---------------------------------------------------------------------------------------------- the actor
class FleetActor(ShardActor):
    """A :class:`ShardActor` kept warm between runs: a lease (one run at a time) and an idle timer (it stops
    itself after ``keep_warm_s`` with no lease and no shard)."""

    def __init__(self, cfg: LabelConfig, cpus: float, info: dict):
        super().__init__(cfg, cpus)
        self.info = dict(info)
        born = self.info.pop("lease", None)  # started by a run for itself (run_workers): its lease
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
        ``replace``: the run of a lease whose holder the caller found gone (:func:`holder_gone`): taken over at
        once, not after it lapses."""
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


# ---------------------------------------------------------------------------------------------- a run's side
class FleetWorkers(OwnWorkers):
    """A fleet's workers as one run uses them (the worker factory of its RayExecutor): started by the run as fleet
    ``name`` (named, detached, leased to it from birth: :func:`run_workers`) or borrowed up already
    (:meth:`borrowed`); their leases renewed while the run lasts and released at its end, never the workers killed.
    Every shard goes with its run's settings, the model spelled as the fleet's workers were built."""

    per_shard_cfg = True
    release_wait_s = 60.0  # how long close() waits for the releases (a lease not released lapses by itself)
    release_log_level = logging.WARNING  # (of a lease not released in that time)
    after_close = None  # called with whether every release was answered

    def __init__(self, ray, cfg: LabelConfig, cpus: float, gpus: float, size: int, name: str = LOCAL_FLEET,
                 keep_warm_s: float | None = None, lease: bool = True):
        """``lease``: each worker started is leased to this run from birth (False: `mcprm fleet up`'s)."""
        import uuid

        self.name, self.keep_warm_s, self.lease = name, keep_warm_s, lease
        self.run_id, self.holder = uuid.uuid4().hex[:12], this_holder(cfg.output)
        self.ray, self.cpus, self.gpus, self.size, self.born = ray, cpus, gpus, size, []
        self.status0: list[dict] | None = None  # borrowed: each worker's status when it was leased
        self.stats0: list[dict] = []  # borrowed: each worker's counters then
        self.source = f"--fleet {name}"  # how the run came to borrow it (the manifest's reason)
        self.borrow_seconds = 0.0
        if ray is None:  # borrowed (the classmethod fills in the rest)
            return
        self.cfg = fleet_cfg(cfg)
        self.model_ref = [self.cfg.model, self.cfg.tokenizer]
        # what every worker knows of its fleet (its status; ``engine``: what borrowing runs must match)
        self.info = {"fleet": name, "size": size, "engine": engine_identity(self.cfg), "model_ref": self.model_ref,
                     "keep_warm_s": float(keep_warm_s), "cpus": cpus, "gpus": gpus, "created_at": time.time()}
        # restarted if they die; leases and status in a group of their own, answered while shards are labeled
        self.cls = ray.remote(num_cpus=cpus, num_gpus=gpus, max_restarts=-1, max_task_retries=0,
                              max_concurrency=self.cfg.worker_shards_most, concurrency_groups={CONTROL: 2})(FleetActor)
        self.release_wait_s = 10.0  # (at the end of a run refused early, a worker may still be loading: it lapses)
        self.release_log_level = logging.INFO
        self.after_close = self._say_kept

    @classmethod
    def borrowed(cls, ray, cfg: LabelConfig, name: str, leased: list[tuple[Any, dict]], run: str, holder: dict,
                 borrow_seconds: float) -> tuple[FleetWorkers, list]:
        """Fleet ``name``'s workers ``leased`` (handle, status) to run ``run`` of ``holder``: the factory and the
        actors for :meth:`pipeline.execution.executors.RayExecutor.of`."""
        self = cls(None, cfg, 0.0, 0.0, len(leased), name, parse_duration(cfg.keep_warm) if cfg.keep_warm else None)
        self.ray, self.cfg, self.run_id, self.holder = ray, cfg, run, holder
        self.status0 = [st for _, st in leased]
        self.cpus, self.gpus = self.status0[0]["cpus"], self.status0[0]["gpus"]
        self.model_ref = self.status0[0]["model_ref"]
        self.borrow_seconds = borrow_seconds
        self.stats0 = [ray.get(control(h, "backend_stats"), timeout=CALL_WAIT_S) for h, _ in leased]
        return self, [h for h, _ in leased]

    def new(self, index: int):
        info = dict(self.info, index=index)
        if self.lease:
            info["lease"] = {"run": self.run_id, "holder": self.holder}
        try:
            actor = self.cls.options(name=actor_name(self.name, index), namespace=NAMESPACE,
                                     lifetime="detached").remote(self.cfg, self.cpus, info)
        except ValueError as e:  # the name is taken: another command started this fleet meanwhile
            if "already" not in str(e):
                raise
            self.abandon()
            if self.name != LOCAL_FLEET:
                raise FleetError(f"a fleet named {self.name!r} was started by another command meanwhile") from None
            raise FleetError("another `mcprm label` on this machine started its warm workers at the same moment: "
                             "rerun this command once that run is done (it then borrows them)") from None
        self.born.append(actor)
        return actor

    def started(self, executor) -> None:
        self.executor = executor
        for i, st in enumerate(self.status0 or []):  # up already: the run starts on them at once
            executor._node_of[i] = st["node"]
            executor.actor_start[i] = (st["started_at"], st["ready_at"])
            executor.ready_at[i] = time.time()
        if self.status0:
            executor.cpus_per_worker, executor.gpus_per_worker = self.cpus, self.gpus
        self._stop = threading.Event()
        threading.Thread(target=self._renew, daemon=True, name="mcprm-fleet-lease").start()

    def shard_cfg(self, cfg: LabelConfig | None) -> LabelConfig:
        # the fleet's own spelling of the model (its engine identity matched this run's)
        return (cfg or self.cfg).replace(model=self.model_ref[0], tokenizer=self.model_ref[1])

    ADDITIVE = ("requests", "samples", "prompt_tokens", "generated_tokens", "cached_prompt_tokens", "generate_seconds",
                "prefix_cache_queries", *ENGINE_SAMPLE_KEYS)

    def stats(self, index: int, actor) -> dict:
        """This run's counters only: what the worker counts now less what it counted when the run borrowed it (a
        warm worker's counters run over all the runs it served; one restarted since: all of it)."""
        now = self.ray.get(control(actor, "backend_stats"), timeout=30)
        was = self.stats0[index] if index < len(self.stats0) else {}
        d = dict(now)
        for k in self.ADDITIVE:
            if isinstance(now.get(k), (int, float)) and isinstance(was.get(k), (int, float)) and now[k] >= was[k]:
                d[k] = round(now[k] - was[k], 3)
        if isinstance(now.get("in_flight_hist"), dict) and isinstance(was.get("in_flight_hist"), dict):
            from pipeline.labeling.ahead import histogram_since

            d["in_flight_hist"] = histogram_since(now["in_flight_hist"], was["in_flight_hist"])
        return d

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_S):
            for i, a in enumerate(list(self.executor.actors)):
                try:
                    other = self.ray.get(control(a, "acquire", self.run_id, self.holder, LEASE_TTL_S), timeout=30)
                except Exception as e:  # noqa: BLE001 - loading or restarting: renewed (taken back) next time
                    log.debug("fleet %s worker %d: lease not renewed (%s)", self.name, i, e)
                    continue
                if other is not None:
                    log.error("fleet %s worker %d was leased to another run (%s) after this run's lease lapsed",
                              self.name, i, other["holder"])

    def close(self, executor) -> None:
        """Release this run's leases (the workers stay up, warm for their keep-warm time from now)."""
        if self._stop.is_set():
            return
        self._stop.set()
        refs = [control(a, "release", self.run_id, self.keep_warm_s) for a in executor.actors]
        released = True
        try:
            self.ray.get(refs, timeout=self.release_wait_s)
        except Exception as e:  # noqa: BLE001 - a worker gone (or still loading); an unreleased lease lapses by itself
            released = False
            log.log(self.release_log_level, "fleet %s: a lease was not released (%s); it lapses in %.0f s", self.name,
                    e, LEASE_TTL_S)
        if self.after_close is not None:
            try:
                self.after_close(released)
            except Exception as e:  # noqa: BLE001 - a notice that failed must not hide the run's own outcome
                log.warning("could not report this machine's warm workers: %s", e)

    def _say_kept(self, released: bool) -> None:
        log.warning("%s", kept_notice(len(self.executor.actors), engine_identity(self.cfg), self.keep_warm_s,
                                      released))

    def manifest_entry(self, executor) -> dict:
        """What the manifest's ``execution.fleet`` says: the workers this run started and kept, or the fleet it
        borrowed (its workers' pids and engine starts, made before this run, and the time the borrowing took)."""
        n = len(executor.actors)
        if self.status0 is None:
            return {"name": self.name, "borrowed": False, "workers": n, "used": executor.active,
                    "keep_warm_s": self.keep_warm_s,
                    "reason": f"started {n} worker(s), kept warm on this machine for {self.keep_warm_s:g} s after "
                              "the run (--keep-warm; `mcprm fleet down` stops them)"}
        return {"name": self.name, "borrowed": True, "workers": n, "pids": [st["pid"] for st in self.status0],
                "borrow_seconds": round(self.borrow_seconds, 3),
                "engine_started_at": [st["ready_at"] for st in self.status0],
                "fleet_engine_start_seconds": [round(st["engine_start_s"], 3) for st in self.status0],
                "reason": f"{self.source}: borrowed {n} warm worker(s) of the fleet, no engine start (borrowed in "
                          f"{self.borrow_seconds:.1f} s)"}


# ---------------------------------------------------------------------------------------------- fleets on a cluster
def connect(cfg: LabelConfig):
    """Ray, connected to the cluster a fleet lives on (``--ray-address`` or ``RAY_ADDRESS``: never a Ray of this
    process's own, whose actors would end with it; without one, this machine's keeper's)."""
    from rollouts.base import require

    ray = require("ray", f"pip install '{RAY_REQUIREMENT}'")
    address = cfg.ray_address or os.environ.get("RAY_ADDRESS")
    if not address or address == "local":
        st = keeper.running()
        if st is None:
            raise FleetError("a fleet lives on a running Ray cluster: start one (`ray start --head`) and pass its "
                             "address with --ray-address ADDRESS (or set RAY_ADDRESS); no warm workers are kept "
                             "on this machine (--keep-warm) either")
        keeper.use_auth()
        why = answers(st["address"]) or accepts(st["address"])
        if why is not None:
            raise FleetError(f"this machine's warm workers' Ray does not answer ({why}): stop it with `mcprm "
                             "fleet down` (it stops its keeper without joining it)")
        address = st["address"]
    if ray.is_initialized():  # (init_ray keeps a connection): the fleet must be looked for where it was asked
        have = ray.get_runtime_context().gcs_address
        if ":" in address and "://" not in address and have != address:
            raise FleetError(f"this process is connected to the Ray cluster at {have}, not {address}: look for the "
                             "fleet from a process of its own (the mcprm command), or call ray.shutdown() first")
    init_ray(address, log_to_driver=cfg.ray_logs)
    return ray


def fleet_names(ray) -> dict[str, list[int]]:
    """Each fleet on the cluster: its name and its live workers' indices."""
    out: dict[str, list[int]] = {}
    for name in keeper.fleet_actor_names(ray):
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
            out.append((h, ray.get(control(h, "status"), timeout=CALL_WAIT_S)))
        except Exception as e:  # noqa: BLE001 - stopped (expired, taken down) between the listing and the call
            log.debug("fleet %s worker %d: %s", name, i, e)
    return out


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
    workers = FleetWorkers(ray, cfg, cpus, gpus, n, name, keep_warm_s, lease=False)
    try:
        actors = [workers.new(i) for i in range(n)]
        ray.get([a.ready.remote() for a in actors])
        return [ray.get(control(a, "status"), timeout=CALL_WAIT_S) for a in actors]
    except BaseException as e:
        workers.abandon()
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


def borrow_fleet(cfg: LabelConfig) -> tuple[FleetWorkers, list]:
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


def lease_workers(ray, cfg: LabelConfig, name: str, workers: list[tuple[Any, dict]], t0: float
                  ) -> tuple[FleetWorkers, list]:
    """Lease the free ones of ``workers`` (fleet ``name``'s, running ``cfg``'s engine), up to ``--num-workers``."""
    import uuid

    want = cfg.num_workers or len(workers)
    run = uuid.uuid4().hex[:12]
    holder = this_holder(cfg.output)
    leased, held = [], []
    for h, st in workers:
        if len(leased) == want:
            break
        other = ray.get(control(h, "acquire", run, holder, LEASE_TTL_S), timeout=CALL_WAIT_S)
        if other is not None and other.get("run") and holder_gone(other.get("holder") or {}):
            other = ray.get(control(h, "acquire", run, holder, LEASE_TTL_S, None, other["run"]), timeout=CALL_WAIT_S)
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
    return FleetWorkers.borrowed(ray, cfg, name, leased, run, holder, time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------- this machine's fleet
def _asked_keep_warm(cfg: LabelConfig) -> float:
    """Seconds asked for (``--keep-warm``, the run file, else the default: off, 0)."""
    return parse_keep_warm(cfg.keep_warm if cfg.keep_warm is not None else DEFAULT_LOCAL_KEEP_WARM)


def _on_a_cluster(cfg: LabelConfig) -> bool:
    return bool(cfg.fleet or cfg.ray_address or os.environ.get("RAY_ADDRESS"))


def local_keep_warm(cfg: LabelConfig, executor: str) -> float | None:
    """Seconds this run's workers stay warm on this machine after it (None: they stop with the run, as they do
    unless the user asks); ``executor``: the one chosen for it (only Ray workers are kept)."""
    if _on_a_cluster(cfg) or cfg.executor == "local" or executor != "ray":
        return None
    return _asked_keep_warm(cfg) or None


def kept_notice(workers: int, engine: dict | None, keep_s: float, released: bool = True) -> str:
    """What a run that keeps workers says as it ends: what stays running, until when, and how to stop it."""
    until = time.time() + keep_s + (0.0 if released else LEASE_TTL_S)
    what = f" ({engine.get('backend')} {os.path.basename(str(engine.get('model')))})" if engine else ""
    return (f"kept warm on this machine: {workers} worker(s){what} with their engine loaded, until "
            f"{time.strftime('%Y-%m-%d %H:%M:%S %Z', time.localtime(until))}"
            f"{'' if released else ' at the latest'} (--keep-warm {keep_s:g} s; a later `mcprm label --keep-warm` "
            f"with the same engine uses them and restarts the clock). Stop them now: {keeper.stop_command()}")


def run_workers(cfg: LabelConfig, executor: str, why: str):
    """The worker factory of the executor a run starts for itself (``executor``, chosen for ``why``): this
    machine's fleet where ``--keep-warm`` asks to keep them (None: the run's own). A run that keeps nothing and
    needs GPUs first stops this machine's idle warm workers (a kept vLLM engine holds most of a GPU's memory)."""
    keep = local_keep_warm(cfg, executor)
    if keep and _connect_local(cfg):
        return functools.partial(FleetWorkers, name=LOCAL_FLEET, keep_warm_s=keep)
    if keep is None and not _on_a_cluster(cfg) and cfg.executor != "local" and _asked_keep_warm(cfg):
        log.warning("--keep-warm: this run labels in this process (%s): nothing is kept; pass --executor ray to "
                    "keep its workers", why)
    if executor == "ray" and not _on_a_cluster(cfg) and cfg.worker_gpus > 0:
        free_local_workers("this `mcprm label` (without --keep-warm it uses workers of its own)")
    return None


def _connect_local(cfg: LabelConfig) -> bool:
    """Join this machine's Ray (started if none is up); False when this process is connected to another Ray
    already (a caller's own: the workers are then started there, not kept)."""
    if keeper.join(keeper.ensure(), cfg.ray_logs) is None:
        log.warning("this process is connected to another Ray cluster: the run's workers are not kept warm")
        return False
    return True


def _stop_idle(ray, wait_s: float, force: bool = False) -> int:
    """Stop this machine's warm workers (refused while one serves a run, unless ``force``) and wait until they
    are gone (their GPUs free)."""
    n = stop_fleet(ray, LOCAL_FLEET, force=force)
    deadline = time.monotonic() + wait_s
    while fleet_names(ray).get(LOCAL_FLEET) and time.monotonic() < deadline:
        time.sleep(0.5)
    return n


def local_fleet(cfg: LabelConfig, executor: str) -> tuple[FleetWorkers, list] | None:
    """This machine's warm workers leased to this run (``executor``: the one chosen for it) when they run its
    engine (None: the run starts its own, kept as this machine's fleet: :func:`run_workers`). Idle ones of another
    engine are stopped."""
    t0 = time.perf_counter()
    keep = local_keep_warm(cfg, executor)
    if not keep or not _connect_local(cfg):
        return None
    import ray

    workers = fleet_status(ray, LOCAL_FLEET)
    if not workers:
        return None
    diff = engine_diff(workers[0][1]["engine"], engine_identity(cfg))
    if diff:
        busy = [st["lease"]["holder"] for _, st in workers if st["lease"]]
        if busy:
            raise FleetError(f"this machine's warm workers run another engine ({'; '.join(diff)}) and serve another "
                             f"run ({busy[0]}): wait for it to finish, or stop them with `{keeper.stop_command()} "
                             "--force`")
        log.warning("this machine's warm workers run another engine (%s): stopping them", "; ".join(diff))
        _stop_idle(ray, 120)
        return None
    try:
        leased, actors = lease_workers(ray, cfg, LOCAL_FLEET, workers, t0)
    except FleetError as e:  # every warm worker serves another run of this machine (their GPUs are taken)
        raise FleetError(f"this machine's GPUs are held by its warm workers, which serve another `mcprm label` now: "
                         f"wait for it to finish (`mcprm fleet status`). {e}") from None
    leased.source = "kept warm on this machine by an earlier run (--keep-warm)"
    leased.keep_warm_s = keep
    engine = workers[0][1]["engine"]
    leased.after_close = lambda released: log.warning("%s", kept_notice(len(actors), engine, keep, released))
    return leased, actors


def free_local_workers(command: str) -> int:
    """Stop this machine's idle warm workers before ``command`` uses its GPUs itself (score, a GPU train, generate
    or judge, a label run that keeps nothing): a kept vLLM engine holds most of a GPU's memory. Workers serving a
    run are left alone (with a warning). Nothing is imported or started, and Ray is never joined, when this
    machine shows no GPU or no keeper runs here. Returns the workers stopped."""
    if not gpu_count() or keeper.running() is None:
        return 0
    with keeper.authenticated():
        got = keeper.connected(f"{command} goes on without checking them")
        if got is None:
            return 0
        ray, joined = got
        try:
            workers = fleet_status(ray, LOCAL_FLEET)
            if any(s["lease"] for _, s in workers):
                log.warning("this machine's warm workers serve a run now: %s may find their GPUs' memory taken",
                            command)
                return 0
            n = _stop_idle(ray, 60)
            if n:
                log.warning("stopped this machine's %d warm worker(s) (kept by an earlier `mcprm label "
                            "--keep-warm`): %s needs the GPUs", n, command)
            return n
        finally:
            if joined:
                ray.shutdown()


def stop_local(force: bool = False) -> tuple[int, str] | None:
    """``mcprm fleet down`` without a fleet name or cluster: stop this machine's warm workers now, then its Ray
    (when no other fleet lives on it). None when no keeper runs here; else (workers stopped, what was done and
    waited for). Refused while they serve a run, unless ``force``. Every wait has a bound: a Ray that does not
    answer its probes is not joined, its keeper is stopped (killed if it does not stop in time)."""
    if keeper.running() is None:
        return None
    n, others = 0, {}
    with keeper.authenticated():
        got = keeper.connected("stopping its keeper without joining it")
        if got is not None:
            ray, joined = got
            try:
                n = _stop_idle(ray, STOP_WORKERS_S, force=force)
                others = fleet_names(ray)
            finally:
                if joined:
                    ray.shutdown()
    if others.get(LOCAL_FLEET):
        said = (f"waited {STOP_WORKERS_S:g} s for {len(others[LOCAL_FLEET])} warm worker(s) to stop; they are "
                "still stopping")
    elif others:
        said = f"left this machine's Ray up for the other fleet(s) on it ({', '.join(others)})"
    else:
        said = keeper.stop() or "its keeper was gone already"
    return n, said
