"""The execute phase of ``label()``: the shards not done yet, each read from its staged file (never the input
again), streamed through the executor (Ray actors or in-process) with bounded memory, and how the run ran (its
workers, GPUs, retries, start-up events). The Ray executor's engines may start during the plan phase
(:class:`EarlyStart`), so that their load overlaps reading the input."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from pipeline.config import LabelConfig
from pipeline.execution.executors import CountedShards
from pipeline.execution.progress import LiveProgress  # phases, ETA, one final line
from pipeline.run.plan import Run
from pipeline.run.staging import read_staged
from pipeline.solution import Solution
from pipeline.storage.lock import OutputLock
from pipeline.storage.manifest import ExecutionFacts
from pipeline.storage.store import Fenced

log = logging.getLogger("mcprm")


class EarlyStart:
    """The Ray executor (its engines) started while the input is read, so that the engine load overlaps
    reading and validation. For a new corpus (or ``--overwrite``) it starts before the input pass; for a refresh
    when the pass stages the first solution the corpus lacks (a re-run with nothing new starts no engine). It
    starts one actor, one more per ``shard_size`` solutions staged, up to the executor's worker count;
    :meth:`take` hands it to the run sized to its shards. Only for the Ray executor: the local one loads its
    model in this process, which has nothing to overlap it with but the reading itself. Whatever the run does not
    take (bad input, nothing to do, any error) :meth:`close` kills (or, for workers kept warm on this machine,
    releases: they stay warm as asked, and say so)."""

    def __init__(self, cfg: LabelConfig):
        self.cfg, self.executor, self.started_at = cfg, None, None

    @staticmethod
    def wanted(cfg: LabelConfig, executor) -> bool:
        from pipeline.execution.executors import choose_executor

        return executor is None and not cfg.fleet and choose_executor(cfg)[0] == "ray"

    def start(self) -> None:
        """Ray up (in this thread: Ray sets its SIGTERM handler from the main thread only) and one actor asked for:
        it loads its model in its own process while this one goes on reading."""
        if self.executor is None:
            from pipeline.execution.executors import make_executor

            self.started_at = time.time()
            self.executor = make_executor(self.cfg, start=1)

    def staged(self, n: int) -> None:
        """``n`` solutions staged so far (called for each): start at the first, one more actor per shard's worth."""
        if self.executor is None:
            self.start()
        want = -(-n // self.cfg.shard_size)
        if self.executor.num_workers < min(want, self.executor.max_workers):
            self.executor.scale_to(want)

    def take(self, shards: int):
        """The started executor, with as many actors as ``shards`` can use (None: none was started)."""
        ex, self.executor = self.executor, None
        if ex is not None:
            ex.scale_to(shards)
        return ex

    def close(self) -> None:
        ex, self.executor = self.executor, None
        if ex is not None:
            ex.close()

    def __enter__(self) -> EarlyStart:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def worker_events(events: dict[str, float], executor) -> None:
    """When this run's first worker entered its constructor and had its backend ready (wall clock): the Ray actors'
    own report (the earliest of each), the local executor's load."""
    starts = list(getattr(executor, "actor_start", {}).values())
    if starts:
        events["first_worker_started"] = min(t for t, _ in starts)
        events["first_worker_ready"] = min(t for _, t in starts)
    elif "engine_started" in events:
        events["first_worker_started"] = events["engine_started"]
        events["first_worker_ready"] = events["engine_started"] + executor.startup_seconds


def _iter_shards(run: Run, skip: set[int]) -> Iterator[tuple[int, list[Solution]]]:
    """The planned shards not done yet, in order, each read from its staged file (never from the input)."""
    for sh in run.plan["shards"]:
        if sh["shard"] not in skip:
            yield sh["shard"], read_staged(run.store, run.vdir, sh)


def execute_run(run: Run, lock: OutputLock, executor=None) -> tuple[dict[int, dict], ExecutionFacts]:
    """Label the shards not done yet through the executor (``executor``: one kept across runs, e.g.
    ``RayExecutor.borrow()``; else one made for this run); every shard's result, and how it ran."""
    cfg, plan, done_shards = run.cfg, run.plan, run.done_shards
    results: dict[int, dict] = dict(done_shards)
    todo = run.added - sum(r["rows"] for r in done_shards.values())
    progress = LiveProgress(todo, cfg.progress)
    t_run, t_run_wall = time.perf_counter(), time.time()
    worker_stats: list[dict] = []
    held_before = 0.0
    own = executor is None  # started by this run (its start-up events are recorded)
    if todo > 0:
        from pipeline.execution.executors import make_executor

        if executor is None and run.starter is not None:  # started while the input was read
            executor = run.starter.take(len(plan["shards"]) - len(done_shards))
            if executor is not None:
                run.events["engine_started"] = run.starter.started_at
                held_before = max(0.0, t_run_wall - run.starter.started_at)
        if executor is None:
            run.events["engine_started"] = time.time()
            executor = make_executor(cfg, shards_hint=len(plan["shards"]) - len(done_shards))
        try:
            def on_done(res: dict) -> None:
                if res["shard"] in results:  # a retried task's second attempt: the first one recorded stays
                    log.info("shard %d finished twice (a retried task); keeping %s", res["shard"],
                             results[res["shard"]]["path"])
                    return
                results[res["shard"]] = res
                lock.check()  # a run that lost its lock stops now, not at the commit
                progress.shard(res)

            executor.on_solution = progress.solution  # live counts from the workers, where supported
            progress.start()
            shards = CountedShards(_iter_shards(run, set(done_shards)), len(plan["shards"]) - len(done_shards))
            version = Fenced(run.version, run.owner)  # shard names carry this owner's id
            executor.run(version, shards, on_done, cfg)  # a kept executor's workers label with this run's settings
            worker_stats = executor.backend_stats()
            if hasattr(executor, "manifest_entry"):  # a fleet's workers, or this run's kept warm
                run.fleet = executor.manifest_entry()
        finally:
            progress.close()
            executor.close()
        if own:
            worker_events(run.events, executor)
    run_seconds = time.perf_counter() - t_run
    missing = [sh["shard"] for sh in plan["shards"] if sh["shard"] not in results]
    if missing:
        raise RuntimeError(f"shards {missing[:10]} did not finish; rerun the same command to resume")
    if executor is None:  # nothing left to label
        return results, ExecutionFacts(run_seconds=run_seconds, worker_stats=worker_stats)
    return results, ExecutionFacts(
        run_seconds=run_seconds, startup_seconds=min(run_seconds, executor.startup_seconds),
        workers=executor.num_workers, gpus=gpus_held(executor.num_workers, cfg.backend_spec.gpus(cfg.backend_options)),
        retried={str(k): v for k, v in executor.retried.items()}, worker_stats=worker_stats, held_before_s=held_before,
        demand=with_shards_held(engine_demand(worker_stats), getattr(executor, "shards_held", None)))


def with_shards_held(demand: dict | None, held: list[int] | None) -> dict | None:
    """The demand, with the shards each worker held at once by the run's end (raised while its engines starved:
    :func:`pipeline.execution.demand.shards_for_demand`), where the executor sized them."""
    if not demand or not held:
        return demand
    return {**demand, "shards_at_once": list(held)}


def engine_demand(worker_stats: list[dict]) -> dict | None:
    """The workers' demand on their engines (:func:`pipeline.labeling.ahead.demand_summary`), against their
    engines' capacity where every worker reports the same one."""
    from pipeline.labeling.ahead import demand_summary

    caps = {w.get("seqs_capacity") for w in worker_stats if w.get("seqs_capacity")}
    out = demand_summary([w.get("in_flight_hist") or {} for w in worker_stats], caps.pop() if len(caps) == 1 else None)
    engine = engine_load(worker_stats)
    return {**(out or {}), **engine} if out or engine else None


def engine_load(worker_stats: list[dict]) -> dict:
    """The engines' own view of the same time, where their backend samples it (vLLM's scheduler gauges,
    :func:`rollouts.vllm_backend.add_engine_sample`): sequences running and waiting per worker on average over
    the samples of work in flight, the most running and the fullest KV cache (over a warm worker's life)."""
    sampled = [w for w in worker_stats if (w.get("engine_samples") or 0) > 0]
    if not sampled:
        return {}
    out = {"engine_running_mean": round(sum(w["engine_running_sum"] / w["engine_samples"] for w in sampled)
                                        / len(sampled), 1),
           "engine_waiting_mean": round(sum(w.get("engine_waiting_sum", 0) / w["engine_samples"] for w in sampled)
                                        / len(sampled), 1),
           "engine_samples": int(sum(w["engine_samples"] for w in sampled)),
           "engine_running_max": max(int(w.get("engine_running_max", 0)) for w in sampled)}
    kv = [w["kv_cache_usage_max"] for w in sampled if w.get("kv_cache_usage_max") is not None]
    if kv:
        out["kv_cache_usage_max"] = max(kv)
    # the engine's steps over the worker's busy time: how long a step took and how many tokens it computed
    stepped = [w for w in sampled if (w.get("engine_steps") or 0) > 0]
    if stepped:
        out["engine_steps"] = int(sum(w["engine_steps"] for w in stepped))
        out["engine_tokens_per_step"] = round(sum(w.get("engine_step_tokens", 0) for w in stepped)
                                              / out["engine_steps"], 1)
        timed = [w for w in stepped if w.get("generate_seconds")]
        if timed:
            out["engine_step_ms"] = round(1000 * sum(w["generate_seconds"] / w["engine_steps"] for w in timed)
                                          / len(timed), 2)
    return out


def gpus_held(workers: int, gpus_each: float) -> int:
    """GPUs a run holds (what its GPU-seconds count): its workers' shares, a GPU with any share counted whole (the
    in-process worker with N engines on a GPU, or workers of 1/N GPU that do not fill their last GPU)."""
    import math

    return math.ceil(workers * gpus_each - 1e-6) if gpus_each > 0 else 0
