"""The engine's own view of its load (vLLM's scheduler gauges, sampled while work is in flight): read from vLLM's
metrics reader as vLLM 0.26 lays it out (a stand-in module of its two classes and one function: vLLM is not
installed here; the real reader runs on the GPU machine), sampled by the ``loop`` engine only while it has work
(checked against what the scripted engine really held at each sample), and carried to the manifest: per worker
on average, a warm worker's share of one run a difference, several engines of a process counted once."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest

import rollouts.vllm_backend as vb
from pipeline.run.execute import engine_demand, engine_load
from rollouts.base import BackendStats

from .test_vllm_loop import SAMPLING, ScriptedEngine, make_backend, reqs


@dataclass
class Metric:
    name: str
    labels: dict


@dataclass
class Gauge(Metric):
    value: float


@dataclass
class Counter(Metric):
    value: int


@dataclass
class Histogram(Metric):
    count: int
    sum: float
    buckets: dict


@pytest.fixture
def reader(monkeypatch):
    """``vllm.v1.metrics.reader`` with a snapshot the test sets."""
    mod = types.ModuleType("vllm.v1.metrics.reader")
    mod.Gauge, mod.Counter, mod.Histogram = Gauge, Counter, Histogram
    mod.snapshot = []
    mod.get_metrics_snapshot = lambda: list(mod.snapshot)
    for name in ("vllm", "vllm.v1", "vllm.v1.metrics"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "vllm.v1.metrics.reader", mod)
    return mod


def test_gauges_are_summed_over_engines_and_the_kv_cache_is_the_fullest(reader):
    reader.snapshot = [
        Gauge("vllm:num_requests_running", {"engine": "0"}, 700.0),
        Gauge("vllm:num_requests_running", {"engine": "1"}, 300.0),
        Gauge("vllm:num_requests_waiting", {"engine": "0"}, 12.0),
        Gauge("vllm:kv_cache_usage_perc", {"engine": "0"}, 0.05),
        Gauge("vllm:kv_cache_usage_perc", {"engine": "1"}, 0.31),
        Counter("vllm:num_requests_running", {}, 5),  # a counter of the same name is not the gauge
        Gauge("vllm:num_preemptions", {}, 3.0),
        Histogram("vllm:iteration_tokens_total", {"engine": "0"}, 400, 300_000.0, {}),
        Histogram("vllm:iteration_tokens_total", {"engine": "1"}, 100, 50_000.0, {}),
        Histogram("vllm:time_to_first_token_seconds", {}, 9, 1.0, {}),
    ]
    assert vb._engine_gauges() == {"running": 1000.0, "waiting": 12.0, "kv_usage": 0.31, "steps": 500.0,
                                   "step_tokens": 350_000.0}
    extra: dict = {}
    vb.add_engine_steps(extra, vb._engine_gauges())
    assert extra == {"engine_steps": 500, "engine_step_tokens": 350_000}
    reader.snapshot = [Counter("vllm:prefix_cache_hits", {}, 9)]
    assert vb._engine_gauges() is None  # no gauge: no sample


def test_samples_add_up_and_keep_the_largest():
    extra: dict = {}
    for g in ({"running": 100.0, "waiting": 0.0, "kv_usage": 0.02}, None, {"running": 300.0, "waiting": 40.0},
              {"running": 200.0, "waiting": 20.0, "kv_usage": 0.01}):
        vb.add_engine_sample(extra, g)
    assert extra == {"engine_samples": 3, "engine_running_sum": 600.0, "engine_waiting_sum": 60.0,
                     "engine_running_max": 300, "kv_cache_usage_max": 0.02}


def test_the_loop_samples_only_while_it_has_work_and_sees_what_the_engine_held(monkeypatch):
    eng = ScriptedEngine(step_s=0.002)
    seen: list[int] = []

    def gauges():  # the engine's true load at the moment it is sampled
        seen.append(len(eng.unfinished))
        return {"running": float(len(eng.unfinished)), "waiting": 0.0}

    sampled: list[float] = []
    real_add = vb.add_engine_sample

    def add(extra, g):  # what the loop took as a sample (every refresh reads the gauges; only busy ones sample)
        sampled.append(g["running"])
        real_add(extra, g)

    monkeypatch.setattr(vb, "_engine_gauges", gauges)
    monkeypatch.setattr(vb, "add_engine_sample", add)
    monkeypatch.setattr(vb, "_prefix_cache_counters", lambda: None)
    monkeypatch.setattr(vb, "REFRESH_S", 0.0)  # every step is a sampling point
    be = make_backend(eng)
    try:
        futs = be.submit(reqs("a", 40), SAMPLING)
        assert all(len(f.result(timeout=10)) == 3 for f in futs)
        ex = dict(be.stats.extra)
    finally:
        be.close()
    assert ex["engine_samples"] == len(sampled) > 0 and set(sampled) <= set(seen)
    assert ex["engine_running_sum"] == pytest.approx(sum(sampled)) and ex["engine_running_max"] == max(sampled)
    # one sample after each step at most, and the refresh at the end of the work is read but not sampled
    assert len(sampled) <= eng.steps and len(seen) > len(sampled)


def test_a_run_reports_the_mean_per_worker_and_a_warm_workers_share(monkeypatch):
    w1 = {"engine_samples": 10, "engine_running_sum": 9000.0, "engine_waiting_sum": 100.0,
          "engine_running_max": 1024, "kv_cache_usage_max": 0.04, "engine_steps": 400, "engine_step_tokens": 360_000,
          "generate_seconds": 10.0}
    w2 = {"engine_samples": 5, "engine_running_sum": 2500.0, "engine_waiting_sum": 0.0, "engine_running_max": 700,
          "engine_steps": 100, "engine_step_tokens": 60_000, "generate_seconds": 5.0}
    assert engine_load([w1, w2, {"requests": 3}]) == {
        "engine_running_mean": 700.0, "engine_waiting_mean": 5.0, "engine_samples": 15,
        "engine_running_max": 1024, "kv_cache_usage_max": 0.04,
        # 420,000 tokens over 500 steps; a step 25 ms on the first worker, 50 ms on the second
        "engine_steps": 500, "engine_tokens_per_step": 840.0, "engine_step_ms": 37.5}
    assert engine_load([{"requests": 3}]) == {} and engine_demand([{"requests": 3}]) is None
    assert engine_demand([w2])["engine_running_mean"] == 500.0  # with no demand histogram, the engine's view alone

    import pipeline.execution.fleet as fleet

    monkeypatch.setattr(fleet, "control", lambda handle, method: w1)
    fw = fleet.FleetWorkers.__new__(fleet.FleetWorkers)
    fw.ray = type("R", (), {"get": staticmethod(lambda x, timeout=None: x)})()
    fw.stats0 = [{"engine_samples": 6, "engine_running_sum": 6600.0, "engine_waiting_sum": 100.0,
                  "engine_steps": 300, "engine_step_tokens": 270_000, "generate_seconds": 8.0}]
    d = fw.stats(0, object())
    assert (d["engine_samples"], d["engine_running_sum"], d["engine_waiting_sum"]) == (4, 2400.0, 0.0)
    assert (d["engine_steps"], d["engine_step_tokens"], d["generate_seconds"]) == (100, 90_000, 2.0)
    load = engine_load([d])  # this run's 4 samples and 100 steps only
    assert load["engine_running_mean"] == 600.0 and load["engine_step_ms"] == 20.0


def test_engines_of_one_process_are_counted_once():
    from rollouts.multi_engine import MultiEngineBackend

    a, b = BackendStats(), BackendStats()
    a.extra.update(engine_samples=8, engine_running_sum=8000.0, engine_waiting_sum=0.0, engine_running_max=1100)
    b.extra.update(engine_samples=3, engine_running_sum=2900.0, engine_waiting_sum=0.0, engine_running_max=1000)
    me = MultiEngineBackend.__new__(MultiEngineBackend)
    me.engines = [types.SimpleNamespace(stats=a), types.SimpleNamespace(stats=b)]
    ex = me.stats.extra
    assert (ex["engine_samples"], ex["engine_running_sum"], ex["engine_running_max"]) == (8, 8000.0, 1100)
