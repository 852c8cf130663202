"""The engines start while the input is read (:class:`EarlyStart`, used by :mod:`pipeline.run`), and the
manifest's start-up facts from a run's wall-clock events (:func:`worker_events`, :func:`startup_facts`)."""

from __future__ import annotations

import time

from pipeline.config import LabelConfig


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


def startup_facts(events: dict[str, float]) -> dict:
    """The manifest's start-up fields from the run's wall-clock events: ``input_seconds`` (reading and
    validating the input), ``engine_start_seconds`` (the engine start this run made: asked for until the first
    worker was ready; absent for a caller's or a fleet's workers), ``startup_overlap_seconds`` (how much of that
    start ran while the input was still being read) and ``startup_events`` (each event's seconds since the run
    began)."""
    ev, out = events, {}
    if "input_started" in ev and "input_ended" in ev:
        out["input_seconds"] = round(ev["input_ended"] - ev["input_started"], 3)
    if "engine_started" in ev and "first_worker_ready" in ev:
        begin, ready = ev["engine_started"], max(ev["engine_started"], ev["first_worker_ready"])
        out["engine_start_seconds"] = round(ready - begin, 3)
        hidden = min(ready, ev.get("input_ended", begin)) - max(begin, ev.get("input_started", begin))
        out["startup_overlap_seconds"] = round(max(0.0, hidden), 3)
    else:
        out["startup_overlap_seconds"] = 0.0
    t0 = ev.get("run_started")
    if t0 is not None:
        out["startup_events"] = {k: round(v - t0, 3) for k, v in sorted(ev.items(), key=lambda kv: kv[1])
                                 if k != "run_started"}
    return out
