"""A run's own workers kept warm on this machine after it ends, when the user asks for it (``--keep-warm
DURATION``, or ``keep_warm`` in the run file; off by default: :data:`pipeline.options.DEFAULT_LOCAL_KEEP_WARM`),
so that the next ``mcprm label --keep-warm`` with the same engine starts none.

- :func:`local_keep_warm`: how long this run's workers stay warm, or None (not asked; a run on the Ray cluster of
  its ``--ray-address``, a ``--fleet`` run, a run in this process).
- :func:`local_fleet`: before the input is read, the run borrows this machine's warm workers (the fleet
  :data:`LOCAL_FLEET` on this machine's own Ray, :mod:`pipeline.execution.local_head`) when they run its engine
  (:func:`pipeline.execution.fleet.engine_identity`); idle ones of another engine are stopped first (they hold the
  GPUs this run needs); workers serving another run of another engine stop this run with an error.
- :class:`KeptRayExecutor`: otherwise the run starts its workers as that fleet (named detached actors, as many as
  the job needs, like any run's), leased to it from birth, and releases them at the end instead of killing them;
  each stops itself after its keep-warm with no run, and the keeper then stops Ray.

However such a run ends (done, failed, interrupted with Ctrl-C), it says what it leaves running, until when, and
the command that stops it (:func:`kept_notice`); ``mcprm fleet down`` (:func:`stop_local`) stops it at once. A run
that keeps nothing and needs GPUs stops this machine's idle warm workers first (:func:`free_local_workers`).

A kept worker is the fleet's (:class:`pipeline.execution.fleet._FleetActor`): one run at a time through a lease
(:mod:`pipeline.execution.leases`) that lapses if its run dies, and ``mcprm fleet status`` / ``mcprm fleet down``
see it with no ``--ray-address``.
"""

from __future__ import annotations

import logging
import os
import time

from pipeline.config import LabelConfig
from pipeline.execution.executors import RayExecutor, choose_executor, make_executor
from pipeline.execution.fleet import (
    NAMESPACE,
    FleetError,
    actor_name,
    engine_diff,
    engine_identity,
    fleet_actor_class,
    fleet_cfg,
    fleet_info,
    fleet_names,
    fleet_status,
    lease_workers,
    stop_fleet,
)
from pipeline.execution.leases import LEASE_TTL_S, Leases, this_holder
from pipeline.options import DEFAULT_LOCAL_KEEP_WARM, parse_keep_warm

log = logging.getLogger("mcprm")

LOCAL_FLEET = "local"  # the fleet name of the workers kept on this machine


def _asked_keep_warm(cfg: LabelConfig) -> float:
    """Seconds asked for (``--keep-warm``, the run file, else the default: off, 0)."""
    return parse_keep_warm(cfg.keep_warm if cfg.keep_warm is not None else DEFAULT_LOCAL_KEEP_WARM)


def _on_a_cluster(cfg: LabelConfig) -> bool:
    return bool(cfg.fleet or cfg.ray_address or os.environ.get("RAY_ADDRESS"))


def local_keep_warm(cfg: LabelConfig) -> float | None:
    """Seconds this run's workers stay warm on this machine after it (None: they stop with the run, as they do
    unless the user asks)."""
    if _on_a_cluster(cfg) or cfg.executor == "local":
        return None
    seconds = _asked_keep_warm(cfg)
    if not seconds or choose_executor(cfg)[0] != "ray":
        return None
    return seconds


def stop_command() -> str:
    """The exact command that stops this machine's warm workers (with this process's state folder, if not the
    default one)."""
    import shlex

    from pipeline.execution import local_head

    d = os.environ.get(local_head.DIR_ENV)
    return (f"{local_head.DIR_ENV}={shlex.quote(d)} " if d else "") + "mcprm fleet down"


def kept_notice(workers: int, engine: dict | None, keep_s: float, released: bool = True) -> str:
    """What a run that keeps workers says as it ends: what stays running, until when, and how to stop it."""
    until = time.time() + keep_s + (0.0 if released else LEASE_TTL_S)
    what = f" ({engine.get('backend')} {os.path.basename(str(engine.get('model')))})" if engine else ""
    return (f"kept warm on this machine: {workers} worker(s){what} with their engine loaded, until "
            f"{time.strftime('%Y-%m-%d %H:%M:%S %Z', time.localtime(until))}"
            f"{'' if released else ' at the latest'} (--keep-warm {keep_s:g} s; a later `mcprm label --keep-warm` "
            f"with the same engine uses them and restarts the clock). Stop them now: {stop_command()}")


def start_executor(cfg: LabelConfig, shards_hint: int | None = None, start: int | None = None):
    """The executor a run starts for itself: its workers kept warm on this machine where --keep-warm says so."""
    if (keep := local_keep_warm(cfg)) and connect_local(cfg):
        return KeptRayExecutor(cfg, keep, shards_hint=shards_hint, start=start)
    if keep is None and not _on_a_cluster(cfg) and cfg.executor != "local" and _asked_keep_warm(cfg):
        log.warning("--keep-warm: this run labels in this process (%s): nothing is kept; pass --executor ray to "
                    "keep its workers", choose_executor(cfg)[1])
    if not _on_a_cluster(cfg) and cfg.worker_gpus > 0 and choose_executor(cfg)[0] == "ray":
        free_local_workers("this `mcprm label` (without --keep-warm it uses workers of its own)")
    return make_executor(cfg, shards_hint=shards_hint, start=start)


def connect_local(cfg: LabelConfig) -> bool:
    """Join this machine's Ray (started if none is up); False when this process is connected to another Ray
    already (a caller's own: the workers are then started there, not kept)."""
    from pipeline.execution import local_head

    if _join(local_head.ensure(), cfg.ray_logs) is None:
        log.warning("this process is connected to another Ray cluster: the run's workers are not kept warm")
        return False
    return True


def _join(st: dict, log_to_driver: bool = False) -> bool | None:
    """Connect this process to this machine's Ray (``st``: its keeper's state): True when it joined now, False when
    it was connected already, None when it is connected to another Ray (left as it is)."""
    import ray

    from pipeline.execution import local_head
    from pipeline.execution.ray_cluster import init_ray

    if ray.is_initialized():
        return False if ray.get_runtime_context().gcs_address == st["address"] else None
    why = local_head.answers(st["address"])
    if why is not None:  # (Ray itself retries an address that does not answer for minutes)
        from pipeline.execution.local_head import KeeperError

        raise KeeperError(f"this machine's warm workers' Ray does not answer ({why}); stop it with "
                          f"`{stop_command()}` and rerun")
    local_head.use_auth()
    init_ray(st["address"], log_to_driver=log_to_driver)
    return True


def _stop_idle(ray, wait_s: float, force: bool = False) -> int:
    """Stop this machine's warm workers (refused while one serves a run, unless ``force``) and wait until they
    are gone (their GPUs free)."""
    n = stop_fleet(ray, LOCAL_FLEET, force=force)
    deadline = time.monotonic() + wait_s
    while fleet_names(ray).get(LOCAL_FLEET) and time.monotonic() < deadline:
        time.sleep(0.5)
    return n


def local_fleet(cfg: LabelConfig):
    """This machine's warm workers leased to this run (a FleetExecutor) when they run its engine; None when the run
    is to start its own (a :class:`KeptRayExecutor`, made where the run makes its executor)."""
    t0 = time.perf_counter()
    keep = local_keep_warm(cfg)
    if not keep or not connect_local(cfg):
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
                             f"run ({busy[0]}): wait for it to finish, or stop them with `{stop_command()} --force`")
        log.warning("this machine's warm workers run another engine (%s): stopping them", "; ".join(diff))
        _stop_idle(ray, 120)
        return None
    try:
        ex = lease_workers(ray, cfg, LOCAL_FLEET, workers, t0)
    except FleetError as e:  # every warm worker serves another run of this machine (their GPUs are taken)
        raise FleetError(f"this machine's GPUs are held by its warm workers, which serve another `mcprm label` now: "
                         f"wait for it to finish (`mcprm fleet status`). {e}") from None
    ex.source = "kept warm on this machine by an earlier run (--keep-warm)"
    ex.keep_warm_s = keep
    engine = workers[0][1]["engine"]
    ex.after_close = lambda released: log.warning("%s", kept_notice(len(ex.actors), engine, keep, released))
    return ex


class KeptRayExecutor(Leases, RayExecutor):
    """This run's workers, started as this machine's warm fleet: a :class:`RayExecutor` whose actors are the fleet's
    (named, detached, leased to this run from birth), as many as the job needs, released (not killed) at the end."""

    release_wait_s = 10.0  # (at the end of a run refused early, a worker may still be loading: its lease lapses)
    release_log_level = logging.INFO

    def __init__(self, cfg: LabelConfig, keep_warm_s: float, name: str = LOCAL_FLEET,
                 shards_hint: int | None = None, start: int | None = None, **kw):
        import uuid

        self.fleet, self.keep_warm_s = name, float(keep_warm_s)
        self.run_id = uuid.uuid4().hex[:12]
        self.holder = this_holder(cfg.output)
        self._born: list = []  # every actor started, for a start that fails half-way
        try:
            super().__init__(fleet_cfg(cfg), shards_hint=shards_hint, start=start, **kw)
        except BaseException:
            self._kill_born()
            raise
        self.cfg = None  # every shard goes with its run's settings (a fleet worker labels its leaseholder's only)
        self.after_close = self._say_kept
        self._start_renewing()

    def _kill_born(self) -> None:
        """A start that failed (no resources, a name taken, Ctrl-C) leaves none of its detached workers behind."""
        import ray

        for a in self._born:
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 - gone already
                pass

    def _actor_class(self, ray, cfg: LabelConfig, cpus: float, gpus: float):
        return fleet_actor_class(ray, cfg, cpus, gpus)

    def _new_actor(self, index: int):
        cfg = self.build_cfg
        info = dict(fleet_info(cfg, self.fleet, self.max_workers, self.keep_warm_s, self.cpus_per_worker,
                               self.gpus_per_worker), index=index, lease={"run": self.run_id, "holder": self.holder})
        try:
            actor = self.actor_cls.options(name=actor_name(self.fleet, index), namespace=NAMESPACE,
                                           lifetime="detached").remote(cfg, self.cpus_per_worker, info)
        except ValueError as e:  # the name is taken: another run of this machine started its workers meanwhile
            if "already" not in str(e):
                raise
            raise FleetError("another `mcprm label` on this machine started its warm workers at the same moment: "
                             "rerun this command once that run is done (it then borrows them)") from None
        self._born.append(actor)
        return actor

    def run(self, version, shards, on_done, cfg: LabelConfig | None = None) -> None:
        b = self.build_cfg  # (the workers' spelling of the model: fleet_cfg's full path)
        super().run(version, shards, on_done, (cfg or b).replace(model=b.model, tokenizer=b.tokenizer))

    def backend_stats(self) -> list[dict]:
        return super().backend_stats()[: self.active]

    def _say_kept(self, released: bool) -> None:
        log.warning("%s", kept_notice(len(self.actors), engine_identity(self.build_cfg), self.keep_warm_s, released))

    def manifest_entry(self) -> dict:
        return {"name": self.fleet, "borrowed": False, "workers": len(self.actors), "used": self.active,
                "keep_warm_s": self.keep_warm_s,
                "reason": f"started {len(self.actors)} worker(s), kept warm on this machine for {self.keep_warm_s:g} "
                          f"s after the run (--keep-warm; `mcprm fleet down` stops them)"}


def _connected_to_keeper(what: str):
    """(ray, joined, st) connected to this machine's Ray with its token, or None when no keeper runs here, its
    Ray does not answer (:func:`pipeline.execution.local_head.answers`, a bounded probe: said, with ``what``
    that is then skipped) or this process is connected to another Ray. The caller shuts Ray down if ``joined``
    (and the token variables are put back by ``local_head.authenticated``)."""
    from pipeline.execution import local_head

    st = local_head.running()
    if st is None:
        return None
    why = local_head.answers(st["address"])
    if why is not None:
        log.warning("this machine's warm workers' Ray (keeper pid %s) does not answer: %s; %s", st.get("pid"), why,
                    what)
        return None
    import ray

    joined = _join(st)
    if joined is None:
        log.warning("this process is connected to another Ray: this machine's warm workers were not checked")
        return None
    return ray, joined, st


def free_local_workers(command: str) -> int:
    """Stop this machine's idle warm workers before ``command`` uses its GPUs itself (score, a GPU train, generate
    or judge, a label run that keeps nothing): a kept vLLM engine holds most of a GPU's memory. Workers serving a
    run are left alone (with a warning). Nothing is imported or started, and Ray is never joined, when this
    machine shows no GPU or no keeper runs here. Returns the workers stopped."""
    from pipeline.execution import local_head
    from pipeline.execution.executors import gpu_count

    if not gpu_count() or local_head.running() is None:
        return 0
    with local_head.authenticated():
        got = _connected_to_keeper(f"{command} goes on without checking them")
        if got is None:
            return 0
        ray, joined, _ = got
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


STOP_WORKERS_S = 60.0  # `mcprm fleet down`: the longest wait for the warm workers to be gone


def stop_local(force: bool = False) -> tuple[int, str] | None:
    """``mcprm fleet down`` without a fleet name or cluster: stop this machine's warm workers now, then its Ray
    (when no other fleet lives on it). None when no keeper runs here; else (workers stopped, what was done and
    waited for). Refused while they serve a run, unless ``force``. Every wait has a bound: a Ray that does not
    answer its probe is not joined, its keeper is stopped (killed if it does not stop in time)."""
    from pipeline.execution import local_head

    st = local_head.running()
    if st is None:
        return None
    n, others = 0, {}
    with local_head.authenticated():
        got = _connected_to_keeper("stopping its keeper without joining it")
        if got is not None:
            ray, joined, _ = got
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
        said = local_head.stop() or "its keeper was gone already"
    return n, said
