"""Where shards run: in this process (``local``) or on Ray actors (``ray``, the default).

Both executors take a lazy iterator of ``(shard_index, solutions)`` and call ``on_done(result)`` as shards
finish (in completion order). Which one a run gets is chosen here (:func:`make_executor`; workers up already,
leased before the input is read: :func:`warm_executor`). Ray is imported only by the execution modules, inside
the functions that need it.

Ray: a worker factory starts the actors (:class:`pipeline.execution.workers.OwnWorkers`, a run's own; a warm
fleet's, :class:`pipeline.execution.fleet.FleetWorkers`), given the resources each gets. One actor per worker
(per GPU for vLLM, ``--num-workers`` CPU actors for hf) keeps its model loaded and is fed a stream of shards, as
many at once as its engines need (:mod:`pipeline.execution.demand`). A shard whose actor dies
(OOM, node loss, ``kill -9``) is resubmitted to the restarted or another actor, at most
``max_shard_retries`` times; since a shard file is written whole under its final name and its content is
deterministic, a retried shard can never be duplicated. An exception raised by mcprm's own code (bad config,
corrupt model) is not retried: it stops the run and the shard is not marked done.

``MCPRM_WORKER_PIDS_FILE=PATH``: the Ray executor writes its own actors' process ids there (JSON, rewritten
when an actor comes back after a restart), so a tool or test can act on exactly this run's workers.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence

from pipeline.config import LabelConfig
from pipeline.execution.demand import ShardsAtOnce
from pipeline.execution.ray_cluster import (
    RAY_REQUIREMENT,
    check_resources,
    cpu_count,
    gpu_count,
    init_error,
    init_ray,
    task_cause,
    worker_shape,
)
from pipeline.execution.workers import OwnWorkers
from pipeline.interrupts import raise_if_requested
from pipeline.solution import Solution

log = logging.getLogger("mcprm")

ShardIter = Iterator[tuple[int, Sequence[Solution]]]


class CountedShards:
    """An iterator of a run's shards that knows how many it has still to hand out (``left``; None: unknown): while
    an actor is still starting, the Ray executor keeps each of the others to its part of them (RayExecutor.run)."""

    def __init__(self, it, n: int | None = None):
        self.it, self.left = iter(it), n

    def __iter__(self):
        return self

    def __next__(self):
        x = next(self.it)
        if self.left is not None:
            self.left -= 1
        return x


class LocalExecutor:
    name = "local"

    def __init__(self, cfg: LabelConfig):
        from pipeline.execution.shard_worker import ShardWorker

        t0 = time.perf_counter()
        self.worker = ShardWorker(cfg)
        self.num_workers = 1
        self.startup_seconds = time.perf_counter() - t0  # model / engine load
        self.retried: dict[int, int] = {}  # shard -> retries, as every executor reports (none here)

    def backend_stats(self) -> list[dict]:
        """Each worker's backend counters for this run (one worker here)."""
        return [self.worker.stats()]

    on_solution: Callable[[int, int, int], None] | None = None  # (shard, rollouts, tokens) per labeled solution

    def run(self, version: int, shards: ShardIter, on_done: Callable[[dict], None],
            cfg: LabelConfig | None = None) -> None:
        """Label ``shards`` in this process; ``cfg``: the run's settings (as every executor takes them)."""
        if cfg is not None:
            self.worker.use(cfg)
        for idx, sols in shards:
            raise_if_requested()
            cb = None
            if self.on_solution is not None:
                def cb(ls, idx=idx):
                    self.on_solution(idx, ls.rollouts, ls.rollout_tokens)
            self.worker.on_solution = cb  # read by ShardWorker.process (its signature stays the same)
            on_done(self.worker.process(version, idx, sols))

    def close(self) -> None:
        self.worker.close()


class RayExecutor:
    """Shards on Ray actors, one per GPU (or CPU slot). Labeling starts as soon as the first actor has built
    its backend; the others join as they come up. ``borrow`` lends the running actors to later runs."""

    name = "ray"

    def __init__(self, cfg: LabelConfig, max_shard_retries: int = 3, shards_hint: int | None = None,
                 start: int | None = None, workers=None):
        """``workers``: the worker factory, called with the resources each actor gets (``(ray, cfg, cpus, gpus,
        size)``; default :class:`pipeline.execution.workers.OwnWorkers`). ``start``: actors to start now, of the
        ``worker_shape`` count (None: all); :meth:`scale_to` starts the others (an executor started while the input
        is still read grows with it: pipeline.run)."""
        from rollouts.base import require

        ray = require("ray", f"pip install '{RAY_REQUIREMENT}'")
        self.ray = ray
        t_start = time.time()
        init_ray(cfg.ray_address, log_to_driver=cfg.ray_logs)
        n, cpus, gpus = worker_shape(ray, cfg, shards_hint)
        self.cpus_per_worker, self.gpus_per_worker = cpus, gpus
        check_resources(ray, cfg, n, cpus, gpus)
        self.workers = (workers or OwnWorkers)(ray, cfg, cpus, gpus, n)
        try:
            actors = [self.workers.new(i) for i in range(max(1, min(n, start or n)))]
        except BaseException:
            self.workers.abandon()
            raise
        self._track(actors, None if self.workers.per_shard_cfg else cfg, max_shard_retries)
        self.max_workers = n  # the checked shape: scale_to starts at most this many
        self.t_created = t_start
        self.workers.started(self)

    @classmethod
    def of(cls, workers, actors: list) -> RayExecutor:
        """An executor over ``actors`` that are up already (a warm fleet's, leased by ``workers``): it starts none,
        and labels on them from the first shard (``startup_seconds`` 0)."""
        ex = cls.__new__(cls)
        ex.ray, ex.workers = workers.ray, workers
        ex._track(list(actors), None)
        workers.started(ex)
        return ex

    def _track(self, actors: list, cfg: LabelConfig | None, max_shard_retries: int = 3) -> None:
        """Run state over ``actors`` (``cfg``: the settings they were built with; None: every shard is sent with
        its run's own, as for a warm fleet's actors: pipeline.execution.fleet)."""
        self.cfg = cfg
        # shards each actor holds at once (its max_concurrency; a fleet's: the borrowing run's, see run())
        self.shards_at_once = cfg.worker_shards if cfg is not None else 2
        self.actors = actors
        self.num_workers = len(actors)
        self.active = self.num_workers  # actors a run uses (the first ones): see borrow()
        self.max_shard_retries = max_shard_retries
        self.retried: dict[int, int] = {}
        self.health_interval_s = 5.0
        self.startup_seconds = 0.0  # until the first actor was ready (labeling starts then)
        self.t_created = time.time()
        self.ready_at: dict[int, float] = {}  # actor -> wall time it was first ready
        self.actor_start: dict[int, tuple[float, float]] = {}  # actor -> (constructor entered, backend ready)
        self.timeline: list[dict] = []  # per shard: actor, submitted, started, ended (wall clock), rollouts, tokens
        self._node_of: dict[int, str] = {}
        self.max_workers = len(actors)

    def scale_to(self, n: int) -> int:
        """Start or stop actors so that ``min(n, max_workers)`` (at least 1) run, before a run: an executor started
        while the input is read grows as it shows more shards, and keeps no more actors than the run has shards
        (the rest are killed, mid-load if need be). Returns the number running."""
        n = max(1, min(int(n), self.max_workers))
        while len(self.actors) < n:
            self.actors.append(self.workers.new(len(self.actors)))
        for a in self.actors[n:]:
            try:
                self.ray.kill(a)
            except Exception:  # pragma: no cover - already gone
                pass
        del self.actors[n:]
        for d in (self.ready_at, self.actor_start, self._node_of):
            for i in [i for i in d if i >= n]:
                del d[i]
        self.num_workers = self.active = n
        return n

    def wait_ready(self) -> list[tuple[str, float, float]]:
        """Wait until every actor has built its backend (a run does not: it starts with the first ready one);
        per actor (node id, constructor entered, backend ready), wall clock. Later runs find them up."""
        got = self.ray.get([a.ready.remote() for a in self.actors])
        now = time.time()
        for i, (node, t_init, t_ready) in enumerate(got):
            self._node_of[i] = node
            self.actor_start.setdefault(i, (t_init, t_ready))
            self.ready_at.setdefault(i, now)
        return got

    def borrow(self, num_workers: int | None = None) -> _Borrowed:
        """This executor's running actors for one more run (``pipeline.run.label(cfg, executor=...)``), the
        first ``num_workers`` of them; closing the borrowed view leaves them running."""
        return _Borrowed(self, num_workers or self.num_workers)

    def backend_stats(self) -> list[dict]:
        """Each live actor's backend counters for this run (a run's own actors: since they started; a restarted
        actor's start again at zero)."""
        out = []
        for i, a in enumerate(self.actors[: self.active]):
            try:
                out.append(self.workers.stats(i, a))
            except Exception as e:  # noqa: BLE001 - a dead or unreachable actor: its counters are lost, not the labels
                log.warning("could not read a worker's backend counters: %s", e)
        return out

    def _report_pids(self) -> None:
        """Write this run's actor pids to ``$MCPRM_WORKER_PIDS_FILE`` (if set), atomically."""
        path = os.environ.get("MCPRM_WORKER_PIDS_FILE")
        if not path:
            return
        import json

        from pipeline.storage.atomic import AtomicFile

        pids = []
        for a in self.actors:
            try:
                pids.append(self.ray.get(a.pid.remote(), timeout=30))
            except Exception:  # an actor that is down right now: reported when it is back
                continue
        with AtomicFile(path, text=True, fsync=False) as f:
            f.write(json.dumps({"driver_pid": os.getpid(), "actor_pids": pids}))

    def run(self, version: int, shards: ShardIter, on_done: Callable[[dict], None],
            cfg: LabelConfig | None = None) -> None:
        """Label ``shards`` on the first ``self.active`` actors; ``cfg``: the run's settings when they are not the
        ones the actors were built with (a kept executor serving another run)."""
        ray = self.ray
        cfg = self.workers.shard_cfg(cfg)
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError, WorkerCrashedError

        if not isinstance(shards, CountedShards):
            shards = CountedShards(shards)  # how many are left is unknown

        transient = (RayActorError, ActorDiedError, ActorUnavailableError, WorkerCrashedError)
        actors = self.actors[: self.active]
        cfg_ref = ray.put(cfg) if cfg is not None and cfg is not self.cfg else None
        pending: dict = {}  # ref -> (actor index, shard index, solutions, submitted at)
        pings: dict = {}  # ref -> actor index, for actors not (or no longer) up until they answer
        load = [0] * len(actors)
        up = [False] * len(actors)
        retry_queue: list[tuple[int, Sequence[Solution]]] = []
        it = iter(shards)
        exhausted = False
        # a borrowed fleet's actors take the borrowing run's count (beyond their max_concurrency, Ray queues)
        at_once = cfg.worker_shards if cfg is not None else self.shards_at_once
        most = max(at_once, cfg.worker_shards_most if cfg is not None else at_once)
        run_cfg = cfg or self.cfg
        demand = ShardsAtOnce(len(actors), at_once, most, shard_size=run_cfg.shard_size if run_cfg else 0)  # raised while a worker's engines starve
        held = demand.held  # shards each actor is given at once
        self.shards_held = held  # (the manifest's engine_demand.shards_at_once: what each worker ended with)
        polls: dict = {}  # ref -> actor index: a demand poll in flight
        t_run = time.perf_counter()

        def submit(shard: int, sols, free: list[int]) -> None:
            a = min(free, key=lambda i: load[i])
            args = (version, shard, sols) + ((cfg_ref,) if cfg_ref is not None else ())
            ref = actors[a].process.remote(*args)
            pending[ref] = (a, shard, sols, time.time())
            load[a] += 1
            demand.load_is(a, load[a])

        def share() -> int | None:
            """While an actor has not been up yet (its engine loading: vLLM's start one at a time on a GPU), the
            most shards any one may hold: its part of what the run has left, so the first one up does not take a
            short run's every shard before the others are ready (None: no such limit, or the count unknown)."""
            left = shards.left
            if all(ever_up) or left is None:
                return None
            return max(1, math.ceil((left + len(retry_queue) + len(pending)) / len(actors)))

        def fill() -> None:
            nonlocal exhausted
            while True:
                # an actor runs the shards it holds at once (its concurrency is its most), so a run's last
                # shards go to the least loaded actor with room at once: waiting for an idle one would leave
                # them for the end, each on an engine starved of everything else
                most_now = share()
                free = [i for i in range(len(actors)) if up[i] and load[i] < min(held[i], most_now or held[i])]
                if not free:
                    return
                if retry_queue:
                    submit(*retry_queue.pop(0), free)
                    continue
                if exhausted:
                    return
                try:
                    shard, sols = next(it)
                except StopIteration:
                    exhausted = True
                    return
                submit(shard, sols, free)

        def mark_down(a: int) -> None:
            if up[a]:
                up[a] = False
                # Ray restarts the actor (max_restarts=-1) where resources allow; it is used again once it
                # answers a ping (with its node). Until then its shards go to the others.
                pings[actors[a].ready.remote()] = a

        def retry(shard: int, sols, why: str) -> None:
            n = self.retried.get(shard, 0) + 1
            self.retried[shard] = n
            if n > self.max_shard_retries:
                raise RuntimeError(
                    f"shard {shard} failed {n} times because its Ray worker died ({why}); giving up. Check the "
                    "worker logs (OOM, GPU errors, lost nodes) and rerun the same command to resume."
                )
            log.warning("worker for shard %d died (%s); resubmitting (retry %d)", shard, why, n)
            retry_queue.append((shard, sols))

        # Every actor is pinged; each one is used from the moment it answers (its backend is built), so labeling
        # starts with the first ready actor instead of the slowest. The answer also says where the actor lives:
        # a task on a node that disappears may never report an error, so the loop checks node liveness itself
        # and moves such an actor's shards elsewhere.
        for a in range(len(actors)):
            if a in self._node_of:  # still up from an earlier run of a kept executor
                up[a] = True
            else:
                pings[actors[a].ready.remote()] = a
        first_ready = any(up)
        ever_up = list(up)  # each actor: up at some point of this run (a restart after that is not a start)
        done_shards: set[int] = set()
        checked = time.monotonic()  # the last check of the actors' nodes
        fill()
        while pending or pings and (retry_queue or not exhausted or not any(up)):
            raise_if_requested()
            for a in demand.due(time.monotonic(), load, up):
                try:
                    polls[actors[a].demand.remote()] = a
                except AttributeError:  # a warm fleet's worker started by an older mcprm: its count stays
                    demand.polled(a, {}, load[a])
            done, _ = ray.wait(list(pending) + list(pings) + list(polls), num_returns=1,
                               timeout=min(self.health_interval_s, demand.poll_s))
            # nodes are checked every health interval, not only in a quiet spell: demand polls answer every few
            # seconds, and a shard on a node that vanished may never answer at all
            if not done or time.monotonic() - checked >= self.health_interval_s:
                checked = time.monotonic()
                alive_nodes = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
                for a in range(len(actors)):
                    if up[a] and self._node_of.get(a) not in alive_nodes:
                        lost = [(r, v) for r, v in pending.items() if v[0] == a]
                        for r, (_, shard, sols, _t) in lost:
                            del pending[r]
                            retry(shard, sols, "its node is gone")
                        load[a] = 0
                        demand.load_is(a, 0)
                        self._node_of.pop(a, None)
                        mark_down(a)
                fill()
                if not done:
                    continue
            ref = done[0]
            if ref not in polls and ref not in pings and ref not in pending:  # its shard was moved off a lost node
                continue
            if ref in polls:
                a = polls.pop(ref)
                try:
                    answer = ray.get(ref)
                except (*transient, ray.exceptions.RayTaskError):  # a worker lost: its shards say so
                    answer = None
                if demand.polled(a, answer, load[a]):
                    fill()
                continue
            if ref in pings:
                a = pings.pop(ref)
                try:
                    node, t_init, t_ready = ray.get(ref)
                except transient as e:
                    if getattr(e, "actor_init_failed", False):  # its constructor raised: no restart will help
                        raise init_error(e) from None
                    pings[actors[a].ready.remote()] = a
                    continue
                except ray.exceptions.RayTaskError as e:  # the backend could not be built (bad model, OOM)
                    raise task_cause(e) from e
                self._node_of[a], up[a], ever_up[a] = node, True, True
                demand.up(a)
                self.ready_at.setdefault(a, time.time())
                self.actor_start.setdefault(a, (t_init, t_ready))
                if not first_ready:
                    first_ready = True
                    self.startup_seconds += time.perf_counter() - t_run
                self._report_pids()
                fill()
                continue
            a, shard, sols, t_sub = pending.pop(ref)
            load[a] -= 1
            demand.load_is(a, load[a])
            try:
                result = ray.get(ref)
            except transient as e:
                self._node_of.pop(a, None)
                mark_down(a)
                retry(shard, sols, type(e).__name__)
                fill()
                continue
            except ray.exceptions.RayTaskError as e:
                # mcprm's own error (a row the worker fails on, storage full, ...): not retried, raised as its
                # own type and said once (the CLI prints it; the worker's traceback only with MCPRM_DEBUG=1).
                raise task_cause(e) from e
            self.timeline.append({"actor": a, "shard": shard, "submitted": t_sub, "done": time.time(),
                                  "started": result.get("t_start"), "ended": result.get("t_end"),
                                  "solutions": len(sols), "rollouts": result.get("rollouts"),
                                  "tokens": result.get("rollout_tokens"),
                                  "generate_s": result.get("generate_seconds"),
                                  "grade_s": result.get("grade_seconds")})
            if shard not in done_shards:  # a shard re-run after a lost node may also finish late
                done_shards.add(shard)
                on_done(result)
            fill()

    def close(self) -> None:
        self.workers.close(self)

    def manifest_entry(self) -> dict | None:
        return self.workers.manifest_entry(self)


class _Borrowed:
    """A kept :class:`RayExecutor`'s first ``n`` actors lent to one run: same interface, ``close`` keeps them."""

    name = "ray"

    def __init__(self, ex: RayExecutor, n: int):
        if not 1 <= n <= ex.num_workers:
            raise ValueError(f"the executor has {ex.num_workers} workers; cannot lend {n}")
        self.ex, self.num_workers = ex, n
        self.retried = ex.retried
        self.startup_seconds = 0.0
        self.on_solution = None

    def run(self, version: int, shards: ShardIter, on_done: Callable[[dict], None], cfg: LabelConfig | None = None
            ) -> None:
        ex = self.ex
        ex.active, t = self.num_workers, len(ex.timeline)
        s0 = ex.startup_seconds
        try:
            ex.run(version, shards, on_done, cfg)
        finally:
            ex.active = ex.num_workers
            self.startup_seconds = ex.startup_seconds - s0
            self.timeline = ex.timeline[t:]

    def backend_stats(self) -> list[dict]:
        return self.ex.backend_stats()[: self.num_workers]

    @property
    def shards_held(self) -> list[int] | None:
        return getattr(self.ex, "shards_held", None)

    def close(self) -> None:
        pass


# fewer CPUs than this and no GPU: one worker in this process, no Ray start (~10-15 s, ~1.7 GB); Ray's worker per CPU
# helped a run of minutes only on a quiet machine (sizing.CPU_WORKER_THREADS), so the reason line offers it only
SMALL_MACHINE_CPUS = 4


def choose_executor(cfg: LabelConfig) -> tuple[str, str]:
    """(executor, why): what ``--executor auto`` means on this machine, or what was asked for."""
    if cfg.fleet:  # (--executor local with --fleet is refused by the config)
        return "ray", f"--fleet {cfg.fleet}: a warm fleet's Ray workers, borrowed"
    if cfg.executor != "auto":
        return cfg.executor, f"--executor {cfg.executor} given"
    if cfg.ray_address or os.environ.get("RAY_ADDRESS"):
        return "ray", "--ray-address / RAY_ADDRESS given"
    if cfg.num_workers is not None and cfg.num_workers > 1:
        return "ray", f"--num-workers {cfg.num_workers} given"
    cpus, gpus = cpu_count(), gpu_count()
    if gpus:
        return "ray", f"{gpus} GPU(s) on this machine"
    if cpus < SMALL_MACHINE_CPUS:
        return "local", (f"a small machine ({cpus} CPUs, no GPU): one worker in this process, no Ray start"
                         + ("; --executor ray uses every CPU (a single-thread worker each; its start pays off "
                            "only on a run of minutes on a quiet machine)" if cpus > 1 else ""))
    return "ray", f"{cpus} CPUs on this machine"


def make_executor(cfg: LabelConfig, shards_hint: int | None = None, start: int | None = None):
    """The executor a run starts for itself (:func:`choose_executor`): on Ray, its workers kept warm on this
    machine after it where ``--keep-warm`` says so (a fleet's workers: :func:`pipeline.execution.fleet.run_workers`),
    else its own."""
    from pipeline.execution import fleet

    name, why = choose_executor(cfg)
    workers = fleet.run_workers(cfg, name, why)
    if name == "local":
        return LocalExecutor(cfg)
    return RayExecutor(cfg, shards_hint=shards_hint, start=start, workers=workers)


def warm_executor(cfg: LabelConfig) -> RayExecutor | None:
    """Workers up already, leased to this run before its input is read: a warm fleet's (``--fleet``), or this
    machine's, kept by an earlier ``--keep-warm`` run, when they run this run's engine; None: the run starts its
    own (:func:`make_executor`)."""
    from pipeline.execution import fleet

    cfg = cfg.resolved()
    leased = fleet.borrow_fleet(cfg) if cfg.fleet else fleet.local_fleet(cfg, choose_executor(cfg)[0])
    return None if leased is None else RayExecutor.of(*leased)
