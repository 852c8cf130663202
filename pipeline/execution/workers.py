"""The Ray actors that label shards, and the worker factory a Ray executor starts them with.

A :class:`ShardActor` is a :class:`pipeline.execution.shard_worker.ShardWorker` living in an actor process. A worker
factory says how a run's actors are started, which settings each shard is sent with, how their counters are read
and what happens to them when the run ends. :class:`OwnWorkers` is a run's own: anonymous actors, killed at its
end. A warm fleet's (:class:`pipeline.execution.fleet.FleetWorkers`) are named and detached, leased to one run at a
time and released, never killed, at its end.
"""

from __future__ import annotations

import os
import time

from pipeline.config import LabelConfig


class ShardActor:
    """Body of the Ray actor: a ShardWorker living in the actor process."""

    def __init__(self, cfg: LabelConfig, cpus: float | None = None):
        t0 = time.time()
        from pipeline.execution.shard_worker import ShardWorker

        self.worker = ShardWorker(cfg, cpus=cpus)
        self.started = (t0, time.time())  # (constructor entered, backend ready): engine start, seen from the actor

    def process(self, version: int, shard: int, solutions, cfg: LabelConfig | None = None) -> dict:
        t0 = time.time()
        if cfg is not None:
            self.worker.use(cfg)  # a worker kept across runs labels each run's shards with that run's settings
        res = self.worker.process(version, shard, solutions)
        res["pid"] = os.getpid()
        res["t_start"], res["t_end"] = t0, time.time()
        return res

    def pid(self) -> int:
        return os.getpid()

    def demand(self) -> dict:
        """The worker's demand since the last ask (ShardWorker.demand_now), answered while its shards run."""
        return self.worker.demand_now()

    def backend_stats(self) -> dict:
        return self.worker.stats()

    def node_id(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def gpu_ids(self) -> list:
        import ray

        return ray.get_gpu_ids()

    def ready(self) -> tuple[str, float, float]:
        """(node id, constructor entered, backend ready) once the backend is built."""
        return (self.node_id(), *self.started)


class OwnWorkers:
    """A run's own workers: anonymous actors of ``cpus`` CPUs and ``gpus`` GPUs each (at most ``size``), built from
    the run's settings ``cfg`` (every shard goes with them), killed when the run ends."""

    per_shard_cfg = False  # True: every shard is sent with its run's settings (the actors serve many runs)

    def __init__(self, ray, cfg: LabelConfig, cpus: float, gpus: float, size: int):
        self.ray, self.cfg, self.cpus, self.gpus, self.size = ray, cfg, cpus, gpus, size
        self.born: list = []  # every actor started, for a start that fails half-way
        self.cls = ray.remote(num_cpus=cpus, num_gpus=gpus, max_restarts=-1, max_task_retries=0,
                              max_concurrency=cfg.worker_shards_most)(ShardActor)  # (shards an actor labels at once)

    def new(self, index: int):
        actor = self.cls.remote(self.cfg, self.cpus)
        self.born.append(actor)
        return actor

    def started(self, executor) -> None:
        """Called once the executor tracks its first actors."""

    def shard_cfg(self, cfg: LabelConfig | None) -> LabelConfig | None:
        """The settings a run's shards are sent with."""
        return cfg

    def stats(self, index: int, actor) -> dict:
        """Actor ``index``'s backend counters for this run."""
        return self.ray.get(actor.backend_stats.remote(), timeout=30)

    def abandon(self) -> None:
        """A start that failed (no resources, a name taken, Ctrl-C) leaves none of its actors behind."""
        for a in self.born:
            try:
                self.ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 - gone already
                pass

    def close(self, executor) -> None:
        for a in executor.actors:
            try:
                self.ray.kill(a)
            except Exception:  # noqa: BLE001 - gone already
                pass

    def manifest_entry(self, executor) -> dict | None:
        """What the manifest's ``execution.fleet`` says (None: nothing, a run's own workers)."""
        return None
