"""The demand a worker puts on its engine (SequenceLoad's histogram, demand_summary, the manifest's
engine_demand): checked against the loads that were really in flight, on a clock the test drives."""

from __future__ import annotations

import concurrent.futures
import math
import random

import pytest

import pipeline.labeling.ahead as ahead
from graders.verdict import Verdict
from pipeline.labeling.ahead import LOAD_BUCKET, SequenceLoad, demand_summary
from pipeline.labeling.scheduler import Scheduler, SchedulerSettings
from pipeline.labeling.strategies import StrategyParams
from pipeline.run.execute import engine_demand
from pipeline.solution import Solution
from rollouts.base import BackendStats, Completion


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(ahead.time, "monotonic", c)
    return c


def test_histogram_is_the_time_spent_at_each_load(clock):
    load = SequenceLoad()
    assert load.histogram() == {}
    load.add(100)
    clock.t += 2.0
    load.add(1000)  # 1,100 in flight
    clock.t += 1.0
    load.add(-1100)
    clock.t += 5.0  # idle between shards: starved time, counted once the next shard submits
    load.add(40)
    clock.t += 0.5
    load.add(-40)
    clock.t += 99.0  # after the last change: not the run's
    assert load.histogram() == {"0": 5.0, "32": 0.5, "96": 2.0, "1088": 1.0}
    d = demand_summary([load.histogram()], capacity=1024)
    true_mean = (100 * 2 + 1100 * 1 + 0 * 5 + 40 * 0.5) / 8.5
    assert true_mean - LOAD_BUCKET < d["mean_in_flight"] <= true_mean
    assert d["share_below_capacity"] == pytest.approx(7.5 / 8.5, abs=1e-3)
    assert d["p10"] == d["p50"] == 0 and d["p90"] == 1088 and d["worker_seconds"] == 8.5


def test_summary_against_a_random_schedule(clock):
    """Many workers, random loads and durations: the summary's mean is the true time-weighted mean less under one
    bucket, its share below the capacity the true share (a capacity on a bucket edge), its median the true one's
    bucket."""
    rng = random.Random(5)
    hists, spans = [], []
    for _ in range(4):
        load, n = SequenceLoad(), 0
        for _ in range(300):
            new = rng.randint(0, 3000)
            load.add(new - n)
            n = new
            dt = rng.expovariate(1.0)
            clock.t += dt
            spans.append((n, dt))
        load.add(-n)
        hists.append(load.histogram())
    total = sum(dt for _, dt in spans)
    true_mean = sum(n * dt for n, dt in spans) / total
    cap = 2048
    true_below = sum(dt for n, dt in spans if n < cap) / total
    d = demand_summary(hists, capacity=cap)
    assert d["worker_seconds"] == pytest.approx(total, abs=0.1)
    assert true_mean - LOAD_BUCKET < d["mean_in_flight"] <= true_mean + 0.05
    assert d["share_below_capacity"] == pytest.approx(true_below, abs=1e-3)
    acc, median = 0.0, None
    for n, dt in sorted(spans):
        acc += dt
        if acc >= total / 2:
            median = n
            break
    assert d["p50"] == median // LOAD_BUCKET * LOAD_BUCKET


def test_no_demand_without_submissions():
    assert demand_summary([{}, {}]) is None
    assert engine_demand([{"requests": 3}]) is None  # a backend that never streamed (hf, offline vLLM)


def test_engine_demand_takes_the_capacity_only_when_the_workers_agree():
    h = {"0": 1.0, "2048": 3.0}
    both = engine_demand([{"in_flight_hist": h, "seqs_capacity": 2048}, {"in_flight_hist": h, "seqs_capacity": 2048}])
    assert both["capacity"] == 2048 and both["share_below_capacity"] == 0.25 and both["worker_seconds"] == 8.0
    mixed = engine_demand([{"in_flight_hist": h, "seqs_capacity": 2048}, {"in_flight_hist": h, "seqs_capacity": 1024}])
    assert "capacity" not in mixed and mixed["mean_in_flight"] == 1536.0


class TimedEngine:
    """A streaming engine that generates each submitted batch at once, taking one clock second per request: while
    it works, exactly that batch's samples are in flight (the truth the scheduler's load is checked against)."""

    name = "timed"
    streaming = True

    def __init__(self, clock):
        self.clock = clock
        self.stats = BackendStats()
        self.truth: dict[int, float] = {}  # samples in flight -> seconds

    def submit(self, requests, sampling):
        n = sum(r.n for r in requests)
        dt = float(len(requests))
        self.truth[n] = self.truth.get(n, 0.0) + dt
        self.clock.t += dt
        futs = []
        for r in requests:
            f = concurrent.futures.Future()
            ok = random.Random(f"{r.prompt}|{r.seed}").random() < 0.5
            f.set_result([Completion("\\boxed{GOLD}" if ok else "\\boxed{WRONG}", 10) for _ in range(r.n)])
            futs.append(f)
        return futs

    def close(self):
        pass


class _Plain:
    def prefix(self, problem, steps):
        return f"Problem: {problem}\nSolution:\n" + "".join(s + "\n" for s in steps)


def _grade(pairs):
    return [Verdict(("\\boxed{" + g + "}") in r, "numeric", "x") for g, r in pairs]


@pytest.mark.parametrize("strategy", ["per-step", "binary-search"])
def test_the_schedulers_load_is_what_the_engine_had_in_flight(clock, strategy):
    sols = [Solution(id=f"s{i}", problem=f"p{i}", answer="GOLD",
                     steps=tuple(f"step {j}" for j in range(5)) + ("The answer is \\boxed{GOLD}.",))
            for i in range(6)]
    eng = TimedEngine(clock)
    load = SequenceLoad()
    sched = Scheduler(eng, _grade, _Plain(), SchedulerSettings(strategy, StrategyParams(k=4), seed=3, streaming=True),
                      load=load)
    sched.label(sols)
    assert load.value == 0  # every continuation submitted came back
    want: dict[str, float] = {}
    for n, s in eng.truth.items():
        k = str(n // LOAD_BUCKET * LOAD_BUCKET)
        want[k] = round(want.get(k, 0.0) + s, 3)
    assert load.histogram() == want and sum(want.values()) > 0


def test_a_warm_workers_demand_is_this_runs_only(monkeypatch):
    """A fleet's worker counts over every run it served: a run's share is the counts now less those at its
    borrowing, bucket by bucket (a bucket the run never reached is left out)."""
    import pipeline.execution.fleet as fleet

    was = {"samples": 10, "in_flight_hist": {"0": 4.0, "96": 2.0}}
    now = {"samples": 25, "in_flight_hist": {"0": 4.0, "96": 5.0, "1024": 1.5}}
    monkeypatch.setattr(fleet, "control", lambda handle, method: now)
    fw = fleet.FleetWorkers.__new__(fleet.FleetWorkers)
    fw.ray = type("R", (), {"get": staticmethod(lambda x, timeout=None: x)})()
    fw.stats0 = [was]
    d = fw.stats(0, object())
    assert d["samples"] == 15 and d["in_flight_hist"] == {"96": 3.0, "1024": 1.5}


@pytest.mark.parametrize("engines", [1, 2])
def test_a_vllm_worker_says_how_many_sequences_its_engines_run(monkeypatch, engines):
    """The capacity a worker's demand is read against: its engines' sequence limit, times the engines it runs in
    its own process."""
    import contextlib

    import rollouts.engine_sizing as sizing
    import rollouts.registry as reg
    from rollouts.options import VLLMOptions

    class FakeLLM:
        streaming = True
        name = "vllm"
        model = "m"

        def __init__(self, **kw):
            self.kw = kw

        def close(self):
            pass

    settings = sizing.EngineSettings(engines_per_gpu=engines, gpu_memory_utilization=0.4, max_num_seqs=None,
                                     max_num_batched_tokens=None, seqs_limit=1024)
    monkeypatch.setattr(reg, "_vllm_class", lambda: FakeLLM)
    monkeypatch.setattr(reg, "vllm_engine_settings", lambda m, o: settings)
    monkeypatch.setattr(reg, "_vllm_prepare", lambda o, cpus: None)
    monkeypatch.setattr(sizing, "gpu_start_lock", contextlib.nullcontext)
    b = reg._vllm_build(reg.ModelRef("m", None, None, 0), VLLMOptions(engines_per_gpu=engines))
    assert b.seqs_capacity == 1024 * engines


def _worker_on_an_engine_of(capacity: int, tmp_path, monkeypatch):
    """A shard worker whose backend only states its engines' capacity (no engine: the load is driven by hand)."""
    import graders.registry
    from pipeline.config import LabelConfig
    from pipeline.execution.shard_worker import ShardWorker

    monkeypatch.setattr(graders.registry, "warm_grader", lambda *a, **k: None)  # no grader processes for this

    class B:
        name = "fake"
        seqs_capacity = capacity
        stats = BackendStats()

        def close(self):
            pass

    return ShardWorker(LabelConfig(input=["x"], output=str(tmp_path / "out")), backend=B(), cpus=1)


def test_a_shard_workers_stats_carry_its_demand_and_capacity(tmp_path, clock, monkeypatch):
    w = _worker_on_an_engine_of(512, tmp_path, monkeypatch)
    w.load.add(300)
    clock.t += 4.0
    w.load.add(-300)
    d = w.stats()
    assert d["in_flight_hist"] == {"288": 4.0} and d["seqs_capacity"] == 512 and "samples" in d
    assert engine_demand([d])["share_below_capacity"] == 1.0


def test_a_demand_poll_is_the_mean_since_the_previous_one(tmp_path, clock, monkeypatch):
    """Each answer covers the time since the previous ask (the first: since the first shard), measured on the
    driven clock; a window with no change of load has no mean."""
    w = _worker_on_an_engine_of(2048, tmp_path, monkeypatch)
    w.load.add(1000)
    clock.t += 50.0
    w.load.add(-1000)
    first = w.demand_now()
    assert first == {"seqs_capacity": 2048, "in_flight_mean": pytest.approx(1000, abs=LOAD_BUCKET)}
    w.load.add(160)
    clock.t += 3.0
    w.load.add(96)  # 256 for 1 s
    clock.t += 1.0
    w.load.add(-256)
    assert w.demand_now() == {"in_flight_mean": pytest.approx((160 * 3 + 256 * 1) / 4, abs=LOAD_BUCKET),
                              "seqs_capacity": 2048}
    assert w.demand_now() == {"seqs_capacity": 2048}


@pytest.mark.parametrize("held,in_flight,capacity,most,want", [
    (2, 211.0, 2048, 32, 20),    # the real 1.5B's binary search on one H200: two shards kept ~211 in flight
    (2, 2500.0, 2048, 32, 2),    # already past the capacity: per-step's demand
    (2, 0.0, 2048, 32, 32),      # nothing measured in flight: as many as allowed
    (20, 1500.0, 2048, 32, 28),  # raised again, in proportion
    (8, 300.0, 2048, 8, 8),      # never past the most
    (4, 4000.0, 1024, 32, 4),    # never lowered
])
def test_shards_at_once_follow_the_measured_demand(held, in_flight, capacity, most, want):
    from pipeline.execution.demand import shards_for_demand

    assert shards_for_demand(held, in_flight, capacity, most) == want


def test_the_shards_a_worker_may_hold_are_the_backends_most_unless_given():
    from pipeline.config import LabelConfig

    cfg = LabelConfig(input=["x"], output="o", backend="vllm", model="m")
    assert (cfg.worker_shards, cfg.worker_shards_most) == (2, 32)
    fixed = cfg.replace(shards_per_worker=4)
    assert (fixed.worker_shards, fixed.worker_shards_most) == (4, 4)
    hf = LabelConfig(input=["x"], output="o")
    assert (hf.worker_shards, hf.worker_shards_most) == (1, 1)


def _drive(w, clock, per_shard: int, start: int, most: int, shards: int, seed: int, poll_s: float = 5.0):
    """Shard worker ``w`` (its engines' capacity stated, no engine), every running shard keeping ``per_shard``
    continuations in flight for a length drawn at random, fed by the executor's rule (a shard whenever it runs
    fewer than it holds) and polled through :class:`ShardsAtOnce` (its answers from ``w.demand_now()``) on the
    driven clock. Returns the count held at each half second."""
    from pipeline.execution.demand import ShardsAtOnce

    rng = random.Random(seed)
    t0 = clock.t
    sa = ShardsAtOnce(1, start, most, poll_s)
    running: list[float] = []  # each running shard's end
    left, held_seen = shards, []
    while left or running:
        while left and len(running) < sa.held[0]:
            running.append(clock.t + rng.uniform(20.0, 60.0))
            w.load.add(per_shard)
            left -= 1
            sa.load_is(0, len(running))
        if sa.due(clock.t - t0, [len(running)], [True]):
            sa.polled(0, w.demand_now(), len(running))
        held_seen.append(sa.held[0])
        clock.t += 0.5
        for end in [e for e in running if e <= clock.t]:
            running.remove(end)
            w.load.add(-per_shard)
            sa.load_is(0, len(running))
    return held_seen


@pytest.mark.parametrize("seed", range(6))
def test_polls_raise_a_starved_worker_to_its_need_before_its_first_shard_ends(tmp_path, clock, monkeypatch, seed):
    """Truth known: each shard keeps 96 in flight against an engine of 2,048 (a need of 22 shards at once). The
    count reaches 22 within a few polls, long before the first shard ends (20 s at the earliest), and never goes
    past it, whatever the shards' lengths."""
    w = _worker_on_an_engine_of(2048, tmp_path, monkeypatch)
    seen = _drive(w, clock, per_shard=96, start=2, most=32, shards=200, seed=seed)
    need = math.ceil(2048 / 96)
    assert max(seen) == need
    assert seen[int(19.5 / 0.5)] == need  # at 19.5 s, before any shard can have ended


def test_a_worker_already_full_is_not_raised(tmp_path, clock, monkeypatch):
    w = _worker_on_an_engine_of(2048, tmp_path, monkeypatch)
    assert set(_drive(w, clock, per_shard=1500, start=2, most=32, shards=20, seed=0)) == {2}


def test_no_poll_without_a_capacity_and_none_past_the_most():
    from pipeline.execution.demand import ShardsAtOnce

    sa = ShardsAtOnce(2, 2, 32, poll_s=5.0)
    assert sa.due(0.0, [2, 2], [True, True]) == []  # the first window starts
    assert sa.due(5.0, [2, 2], [True, False]) == [0]  # a worker down is not asked
    assert sa.due(6.0, [2, 2], [True, True]) == [1]  # up again; worker 0's answer is awaited
    assert sa.due(20.0, [2, 2], [True, True]) == []  # both answers awaited
    assert not sa.polled(0, {}, 2)  # its backend states no capacity: never asked again
    assert not sa.polled(1, {"seqs_capacity": 1024}, 2)  # no time in the window: no measure
    assert sa.due(100.0, [2, 2], [True, True]) == [1]
    assert sa.polled(1, {"seqs_capacity": 1024, "in_flight_mean": 10.0}, 2) and sa.held == [2, 32]
    assert sa.due(200.0, [2, 32], [True, True]) == []


def test_a_worker_up_later_starts_at_the_count_the_others_reached():
    from pipeline.execution.demand import ShardsAtOnce

    sa = ShardsAtOnce(3, 2, 32)
    sa.held[0] = 20
    sa.up(1)
    assert sa.held == [20, 20, 2]


def test_a_worker_that_states_its_capacity_holds_the_shards_that_fill_it_from_its_first_poll():
    """One continuation in flight per solution (a binary search's usual demand) fills an engine of 2,048 with 21
    shards of 100: that many from the first answer on, even where the measured window says the engine is full
    already (drawing ahead filled it), never past the most, and none where the shard size is unknown."""
    from pipeline.execution.demand import ShardsAtOnce, filling_shards

    assert filling_shards(2048, 100, 32) == 21 and filling_shards(2048, 64, 16) == 16
    assert filling_shards(2048, 0, 32) == 0 and filling_shards(0, 64, 32) == 0
    sa = ShardsAtOnce(1, 2, 32, poll_s=5.0, shard_size=100)
    assert sa.due(0.0, [2], [True]) == [] and sa.due(5.0, [2], [True]) == [0]
    assert sa.polled(0, {"seqs_capacity": 2048, "in_flight_mean": 3000.0}, 2) and sa.held == [21]
    capped = ShardsAtOnce(1, 2, 8, poll_s=5.0, shard_size=64)
    capped.due(0.0, [2], [True]), capped.due(5.0, [2], [True])
    assert capped.polled(0, {"seqs_capacity": 2048}, 2) and capped.held == [8]  # no measure yet: the floor alone
    unsized = ShardsAtOnce(1, 2, 32, poll_s=5.0)
    unsized.due(0.0, [2], [True]), unsized.due(5.0, [2], [True])
    assert not unsized.polled(0, {"seqs_capacity": 2048, "in_flight_mean": 3000.0}, 2) and unsized.held == [2]

