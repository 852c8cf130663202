"""The Ray executor's shards at once, on a real local Ray: a starved worker raised from polls of its demand while
its first shards still run, and the first worker up held to its part of a short run while another still starts.
The workers are stand-in actors (scheduling logic only: no engine) that start and end their shards when the test
says so, with a demand of 96 continuations per running shard against an engine of 2,048."""

from __future__ import annotations

import threading
import time

import pytest

from pipeline.execution.executors import CountedShards

ray = pytest.importorskip("ray")


class Paced:
    """Shards that end only when released; its demand: 96 in flight per running shard, capacity 2,048."""

    def __init__(self):
        self.running = self.most_running = self.ended = 0
        self.go = threading.Event()
        self.may_start = threading.Event()  # its "engine" is up once the test says so
        self.lock = threading.Lock()

    def ready(self):
        self.may_start.wait(120)  # bounded: a test that fails never leaves a start waiting for ever
        t = time.time()
        return ray.get_runtime_context().get_node_id(), t, t

    def let_start(self):
        self.may_start.set()

    def pid(self):
        import os

        return os.getpid()

    def process(self, version, shard, solutions, cfg=None):
        with self.lock:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        self.go.wait(120)  # bounded: a test that fails never leaves a shard waiting for ever
        with self.lock:
            self.running -= 1
            self.ended += 1
        return {"shard": shard, "rows": len(solutions)}

    def demand(self):
        with self.lock:
            return {"seqs_capacity": 2048, "in_flight_mean": 96.0 * self.running}

    def seen(self):
        with self.lock:
            return self.most_running, self.ended

    def release(self):
        self.go.set()


CFG = dict(input=["x"], output="o", backend="vllm", model="m")  # vLLM's count: 2, raised up to 32


def _started(n: int, concurrency: int, up: int | None = None) -> list:
    """``n`` stand-in workers, the first ``up`` of them (all: None) started."""
    cls = ray.remote(num_cpus=0, max_concurrency=concurrency)(Paced)
    actors = [cls.remote() for _ in range(n)]
    ray.get([a.let_start.remote() for a in actors[: n if up is None else up]])
    return actors


def _run(actors: list, cfg, shards: int):
    """The Ray executor over ``actors`` labeling ``shards`` one-solution shards in a thread of its own: (executor,
    thread, finished shards' results, the error it raised if any)."""
    from pipeline.execution.executors import RayExecutor
    from pipeline.execution.workers import OwnWorkers

    ex = RayExecutor.of(OwnWorkers(ray, cfg, 0, 0, len(actors)), actors)
    done: list[dict] = []
    failed: list[BaseException] = []

    def run():
        try:
            ex.run(1, CountedShards(iter([(i, [object()]) for i in range(shards)]), shards), done.append, cfg)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            failed.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return ex, t, done, failed


def _until(pred, what) -> None:
    from pipeline.execution.demand import POLL_S

    deadline = time.monotonic() + 20 * POLL_S  # a bound on the wait, not a timing claim
    while time.monotonic() < deadline and not pred():
        time.sleep(0.2)
    assert pred(), what() if callable(what) else what


def _finish(actors: list, t: threading.Thread, done: list, failed: list, shards: int) -> None:
    """Let every worker start and every shard end; the run ends with each shard done once, and the workers go."""
    for a in actors:
        ray.get(a.let_start.remote())
        ray.get(a.release.remote())
    t.join(60)
    assert not failed and not t.is_alive()
    assert sorted(r["shard"] for r in done) == list(range(shards))
    for a in actors:
        ray.kill(a)


@pytest.mark.parametrize("shard_size,need", [
    (512, 22),  # ceil(2 x 2,048 / 192): the need measured from two shards' 192 in flight (the floor is 4)
    (80, 26),  # the floor: ceil(2,048 / 80) shards of one continuation per solution fill the engine
])
def test_a_starved_worker_is_raised_to_its_need_before_a_shard_ends(local_ray, shard_size, need):
    from pipeline.config import LabelConfig

    cfg = LabelConfig(**CFG, shard_size=shard_size)
    (actor,) = actors = _started(1, cfg.worker_shards_most + 2)
    ex, t, done, failed = _run(actors, cfg, 40)
    try:
        _until(lambda: ray.get(actor.seen.remote())[0] >= need, f"the worker never held {need} shards")
        most_running, ended = ray.get(actor.seen.remote())
        assert ended == 0
        assert most_running == need
    finally:
        _finish(actors, t, done, failed, 40)
    assert ex.shards_held == [need]


def test_the_first_worker_up_takes_its_part_of_a_short_run_not_all_of_it(local_ray):
    """Two workers, the second still starting (engines on one GPU start one at a time): the first, raised to 22
    shards at once by its demand, holds 5 of the run's 10, and the second takes the other 5 once it is up."""
    from pipeline.config import LabelConfig

    cfg = LabelConfig(**CFG, shard_size=512)  # the floor (4 shards) below the measured need
    first, second = actors = _started(2, cfg.worker_shards_most + 3, up=1)
    ex, t, done, failed = _run(actors, cfg, 10)
    try:
        _until(lambda: getattr(ex, "shards_held", None) and ex.shards_held[0] >= 22,
               "the first worker's count was never raised")
        time.sleep(2.0)  # its raise let the executor hand it more at once: give those submits time to arrive
        assert ray.get(first.seen.remote()) == (5, 0)
        ray.get(second.let_start.remote())
        _until(lambda: ray.get(second.seen.remote())[0] == 5,
               lambda: f"the second worker did not take the other 5: {ray.get([first.seen.remote(), second.seen.remote()])}")
        assert ray.get(first.seen.remote()) == (5, 0)
    finally:
        _finish(actors, t, done, failed, 10)


def test_a_runs_last_shards_go_at_once_to_a_worker_with_room(local_ray):
    """Three shards, one worker that runs four at once: all three run together (the last of a run is not held
    back until the worker is idle, where it would run alone at the end)."""
    from pipeline.config import LabelConfig

    cfg = LabelConfig(**CFG, shards_per_worker=4)
    (actor,) = actors = _started(1, 6)
    _ex, t, done, failed = _run(actors, cfg, 3)
    try:
        _until(lambda: ray.get(actor.seen.remote())[0] >= 3, "the worker never ran 3 shards")
        assert ray.get(actor.seen.remote()) == (3, 0)
    finally:
        _finish(actors, t, done, failed, 3)
