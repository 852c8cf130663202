"""When a run's own workers stay warm on this machine after it (``--keep-warm``: only when asked), decided from the
config alone (the mechanism itself: tests/integration/test_keep_warm.py)."""

from __future__ import annotations

import pytest

from pipeline.config import ConfigError, LabelConfig
from pipeline.execution import fleet
from pipeline.execution.executors import choose_executor
from pipeline.options import DEFAULT_LOCAL_KEEP_WARM, parse_duration, parse_keep_warm


def local_keep_warm(c: LabelConfig) -> float | None:
    return fleet.local_keep_warm(c, choose_executor(c)[0])


def cfg(**kw) -> LabelConfig:
    return LabelConfig.from_dict(dict({"input": ["x.jsonl"], "output": "out", "executor": "ray"}, **kw),
                                 source="test")


@pytest.fixture(autouse=True)
def _no_env_address(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


def test_nothing_is_kept_unless_asked():
    # a GPU engine kept after the command holds its GPU: only a user who asks for it gets it
    assert parse_keep_warm(DEFAULT_LOCAL_KEEP_WARM) == 0
    assert local_keep_warm(cfg(backend="vllm", model="m")) is None


def test_kept_when_asked_on_the_command_line_or_in_the_run_file(tmp_path):
    assert local_keep_warm(cfg(backend="vllm", model="m", keep_warm="10m")) == parse_duration("10m")
    run_file = tmp_path / "run.yaml"
    run_file.write_text("input: [x.jsonl]\noutput: out\nexecutor: ray\nbackend: vllm\nmodel: m\nkeep_warm: 10m\n")
    assert local_keep_warm(LabelConfig.from_file(str(run_file))) == 600.0


@pytest.mark.parametrize("kw", [
    dict(backend="vllm", model="m"),  # not asked: the default
    dict(backend="vllm", model="m", ray_address="10.0.0.1:6379"),  # a cluster: `mcprm fleet up` keeps workers there
    dict(backend="vllm", model="m", keep_warm="0"),
    dict(backend="vllm", model="m", keep_warm="off"),
    dict(backend="hf"),
])
def test_not_kept(kw):
    assert local_keep_warm(cfg(**kw)) is None


def test_an_env_address_is_a_cluster(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert local_keep_warm(cfg(backend="vllm", model="m", keep_warm="10m")) is None


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


def test_keep_warm_needs_a_ray_with_token_authentication():
    from pipeline.execution.ray_cluster import RAY_MIN_VERSION, keep_warm_ray_problem

    assert RAY_MIN_VERSION >= (2, 52)
    assert "Ray >= 2.52" in keep_warm_ray_problem("2.51.0") and "pip install -U" in keep_warm_ray_problem("2.30.1")
    assert keep_warm_ray_problem("2.52.0") is None and keep_warm_ray_problem("3.0.0") is None


def test_the_package_requires_that_ray():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "pyproject.toml").read_text()
    floor = re.search(r'"ray>=(\d+)\.(\d+)', text)
    from pipeline.execution.ray_cluster import RAY_MIN_VERSION

    assert floor and (int(floor.group(1)), int(floor.group(2))) >= RAY_MIN_VERSION


def test_the_stop_command_names_a_state_folder_of_its_own(monkeypatch):
    from pipeline.execution import keeper

    monkeypatch.delenv(keeper.DIR_ENV, raising=False)
    assert keeper.stop_command() == "mcprm fleet down"
    monkeypatch.setenv(keeper.DIR_ENV, "/x y")
    assert keeper.stop_command() == "MCPRM_LOCAL_RAY_DIR='/x y' mcprm fleet down"
    text = fleet.kept_notice(2, {"backend": "vllm", "model": "/m/Qwen"}, 600)
    assert "2 worker(s) (vllm Qwen)" in text and "until " in text and text.endswith("mcprm fleet down")


def test_a_lease_whose_process_is_gone_is_taken_over_at_once():
    """A run killed with -9 on this machine leaves its lease: a rerun here sees its process is gone and takes the
    worker at once instead of failing until the lease lapses (a lease held by a live process, or by a process of
    another machine, is left alone)."""
    import subprocess
    import sys
    import threading

    from pipeline.execution.fleet import FleetActor, holder_gone, this_holder

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    me = this_holder("/a")
    dead = dict(me, pid=p.pid, process=dict(me["process"], pid=p.pid))
    assert holder_gone(dead) and not holder_gone(me)
    assert holder_gone(dict(me, process=dict(me["process"], start="1")))  # this pid, reused by another process
    assert not holder_gone(dict(dead, machine="node-2-0000"))

    a = object.__new__(FleetActor)  # the lease state only, without a backend
    a.lease, a.busy, a.idle_since, a.runs_served, a._lock = None, 0, 0.0, 0, threading.Lock()
    a.stopping, a.info = False, {"keep_warm_s": 60.0}
    assert a.acquire("r1", dead, 60, now=100.0) is None
    assert a.acquire("r2", this_holder("/b"), 60, now=110.0)["run"] == "r1"  # held
    assert a.acquire("r2", this_holder("/b"), 60, 110.0, "r0") is not None  # replacing another run: no
    assert a.acquire("r2", this_holder("/b"), 60, 110.0, "r1") is None and a.lease["run"] == "r2"


def test_a_run_in_this_process_keeps_nothing_and_says_so(caplog, monkeypatch):
    """The worker factory a run's executor gets (pipeline.execution.fleet.run_workers): a run that labels in this
    process keeps nothing and says why; a run on a cluster's Ray gets its own workers; neither touches a keeper."""
    import logging

    monkeypatch.setattr(fleet.keeper, "ensure", lambda *a, **k: pytest.fail("no keeper may be started"))
    with caplog.at_level(logging.WARNING, logger="mcprm"):
        assert fleet.run_workers(cfg(executor="auto", keep_warm="10m"), "local", "a small machine") is None
    assert "--keep-warm: this run labels in this process (a small machine): nothing is kept" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mcprm"):
        assert fleet.run_workers(cfg(ray_address="10.0.0.1:6379"), "ray", "--ray-address given") is None
    assert caplog.text == ""
