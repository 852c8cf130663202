"""Issue 29: the manifest reports what users pay, GPU-seconds, in all and per solution labeled by this run."""

from __future__ import annotations

import pytest

from pipeline.config import LabelConfig
from pipeline.storage.manifest import ExecutionFacts, InputCounts, build_manifest


def _manifest(gpus: int, held_before_s: float = 0.0):
    cfg = LabelConfig(model="m")
    plan = {"version": 1, "identity": "x", "shards": [{"shard": 0}, {"shard": 1}]}
    results = {0: {"path": "data/v00001/part-00000.a.parquet", "rows": 30, "rollouts": 90, "rollout_tokens": 900},
               1: {"path": "data/v00001/part-00001.a.parquet", "rows": 10, "rollouts": 20, "rollout_tokens": 200,
                   "resumed": True}}  # taken over from an interrupted run: not labeled (nor paid for) by this one
    facts = ExecutionFacts(run_seconds=50.0, startup_seconds=10.0, workers=2, gpus=gpus, held_before_s=held_before_s)
    return build_manifest(cfg, plan, results, None, None, InputCounts(), facts)["throughput"]


def test_gpu_seconds_in_all_and_per_solution_of_this_run():
    t = _manifest(gpus=2)
    assert t["gpu_seconds"] == pytest.approx(100.0) and t["labeling_gpu_seconds"] == pytest.approx(80.0)
    assert t["gpu_seconds_per_solution"] == pytest.approx(100.0 / 30, abs=1e-4)


def test_no_gpu_no_gpu_seconds():
    t = _manifest(gpus=0)
    assert t["gpu_seconds"] is None and t["gpu_seconds_per_solution"] is None


def test_an_engine_started_while_the_input_was_read_is_billed_from_its_start():
    """Its GPUs were held for the 7 s before the shards began as well: in the bill, not in the labeling rate."""
    t = _manifest(gpus=2, held_before_s=7.0)
    assert t["gpu_seconds"] == pytest.approx(2 * 57.0) and t["labeling_gpu_seconds"] == pytest.approx(80.0)
    assert t["gpu_seconds_per_solution"] == pytest.approx(2 * 57.0 / 30, abs=1e-4)
    assert t["seconds"] == pytest.approx(50.0)
