"""Issue 29: when a run's own workers stay warm on this machine after it (``--keep-warm``), decided from the config
alone (the mechanism itself: tests/integration/test_keep_warm.py)."""

from __future__ import annotations

import pytest

from pipeline.config import ConfigError, LabelConfig
from pipeline.execution.kept import local_keep_warm
from pipeline.options import DEFAULT_LOCAL_KEEP_WARM, parse_duration, parse_keep_warm


def cfg(**kw) -> LabelConfig:
    return LabelConfig.from_dict(dict({"input": ["x.jsonl"], "output": "out", "executor": "ray"}, **kw),
                                 source="test")


@pytest.fixture(autouse=True)
def _no_env_address(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


def test_a_gpu_backend_on_this_machine_is_kept_warm_by_default():
    assert local_keep_warm(cfg(backend="vllm", model="m")) == parse_duration(DEFAULT_LOCAL_KEEP_WARM) > 0


@pytest.mark.parametrize("kw", [
    dict(backend="vllm", model="m", ray_address="10.0.0.1:6379"),  # a cluster: `mcprm fleet up` keeps workers there
    dict(backend="vllm", model="m", keep_warm="0"),
    dict(backend="vllm", model="m", keep_warm="off"),
    dict(backend="hf"),  # a CPU backend: not by default
])
def test_not_kept(kw):
    assert local_keep_warm(cfg(**kw)) is None


def test_an_env_address_is_a_cluster(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert local_keep_warm(cfg(backend="vllm", model="m")) is None


def test_a_cpu_backend_when_asked():
    assert local_keep_warm(cfg(backend="hf", keep_warm="90s")) == 90.0


def test_keep_warm_values():
    assert parse_keep_warm("0") == 0.0 and parse_keep_warm("2m") == 120.0
    with pytest.raises(ValueError):
        parse_keep_warm("soon")


@pytest.mark.parametrize("kw, says", [
    (dict(keep_warm="5m", ray_address="10.0.0.1:6379"), "--keep-warm without --fleet"),
    (dict(keep_warm="5m", executor="local"), "cannot run with --executor local"),
    (dict(keep_warm="later"), "--keep-warm: expected a duration"),
])
def test_refused(kw, says):
    with pytest.raises(ConfigError, match=says):
        cfg(**kw)
