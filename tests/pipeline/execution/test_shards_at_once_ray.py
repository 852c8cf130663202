"""The Ray executor raises a starved worker's shards at once from polls of its demand while its first shards still
run, on a real local Ray. The worker is a stand-in actor (scheduling logic only: no engine), whose shards wait
until the test lets them end and whose demand is 96 continuations per running shard against an engine of 2,048."""

from __future__ import annotations

import threading
import time

import pytest

ray = pytest.importorskip("ray")


class Paced:
    """Shards that end only when released; its demand: 96 in flight per running shard, capacity 2,048."""

    def __init__(self):
        self.running = self.most_running = self.ended = 0
        self.go = threading.Event()
        self.lock = threading.Lock()

    def ready(self):
        t = time.time()
        return ray.get_runtime_context().get_node_id(), t, t

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


@pytest.fixture(scope="module")
def local_ray():
    from pipeline.execution import ray_temp

    folder = ray_temp.new()
    ray.init(address="local", num_cpus=2, include_dashboard=False, ignore_reinit_error=True, logging_level="ERROR",
             log_to_driver=False, _temp_dir=folder)
    try:
        yield ray
    finally:
        ray.shutdown()
        ray_temp.remove(folder)


def test_a_starved_worker_is_raised_to_its_need_before_a_shard_ends(local_ray):
    from pipeline.config import LabelConfig
    from pipeline.execution.demand import POLL_S
    from pipeline.execution.executors import RayExecutor
    from pipeline.execution.workers import OwnWorkers

    cfg = LabelConfig(input=["x"], output="o", backend="vllm", model="m")  # vLLM's count: 2, raised up to 32
    actor = ray.remote(num_cpus=0, max_concurrency=cfg.worker_shards_most + 2)(Paced).remote()
    ex = RayExecutor.of(OwnWorkers(ray, cfg, 0, 0, 1), [actor])
    done: list[dict] = []
    failed: list[BaseException] = []

    def run():
        try:
            ex.run(1, iter([(i, [object()]) for i in range(40)]), done.append, cfg)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            failed.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 20 * POLL_S  # a bound on the wait, not a timing claim
        while time.monotonic() < deadline and ray.get(actor.seen.remote())[0] < 22:
            time.sleep(0.2)
        most_running, ended = ray.get(actor.seen.remote())
        assert ended == 0
        assert most_running == 22  # ceil(2 x 2,048 / 192): the need, from two shards' 192 in flight
    finally:
        ray.get(actor.release.remote())
        t.join(60)
    assert not failed and not t.is_alive()
    assert sorted(r["shard"] for r in done) == list(range(40))
    assert ex.shards_held == [22]
    ray.kill(actor)
