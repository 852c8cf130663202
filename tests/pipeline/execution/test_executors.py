"""Executors (unit): which executor runs, chosen by what the machine has."""

from __future__ import annotations

from pipeline.config import LabelConfig
from pipeline.execution import executors


def test_executor_chosen_by_machine(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(executors, "cpu_count", lambda: 2)
    monkeypatch.setattr(executors, "gpu_count", lambda: 0)
    choose = executors.choose_executor
    assert choose(LabelConfig())[0] == "local"
    assert choose(LabelConfig(executor="ray")) == ("ray", "--executor ray given")
    assert choose(LabelConfig(ray_address="auto"))[0] == "ray"
    monkeypatch.setattr(executors, "gpu_count", lambda: 2)
    assert choose(LabelConfig()) == ("ray", "2 GPU(s) on this machine")
    monkeypatch.setattr(executors, "gpu_count", lambda: 0)
    monkeypatch.setattr(executors, "cpu_count", lambda: 16)
    assert choose(LabelConfig())[0] == "ray"
