"""A CPU run's workers x threads: the threads default is declared once (sizing.CPU_WORKER_THREADS), cores are
used by workers (one per CPU), never oversubscribed, and a 2-core machine's in-process run says how to use both
cores."""

from __future__ import annotations

import pytest

from pipeline.config import LabelConfig
from pipeline.execution import executors
from pipeline.execution.sizing import CPU_WORKER_THREADS, planned_workers


@pytest.mark.parametrize("cpus", [2, 4, 16])
def test_ray_cpu_workers_times_threads_fill_the_cores_and_no_more(monkeypatch, cpus):
    monkeypatch.setattr(executors, "cpu_count", lambda: cpus)
    monkeypatch.setattr(executors, "gpu_count", lambda: 0)
    cfg = LabelConfig(executor="ray")
    assert cfg.worker_cpus() == CPU_WORKER_THREADS == 1
    assert planned_workers(cfg) * cfg.worker_cpus() == cpus


def test_small_machine_says_how_to_use_every_core(monkeypatch):
    monkeypatch.setattr(executors, "cpu_count", lambda: 2)
    monkeypatch.setattr(executors, "gpu_count", lambda: 0)
    name, why = executors.choose_executor(LabelConfig())
    assert name == "local" and planned_workers(LabelConfig()) == 1
    assert "small machine" in why and "--executor ray uses every CPU" in why, why
    monkeypatch.setattr(executors, "cpu_count", lambda: 1)
    assert "--executor ray" not in executors.choose_executor(LabelConfig())[1]  # nothing to gain on one CPU
