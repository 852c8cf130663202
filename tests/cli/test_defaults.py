"""Every default a command shows is the one declared where the work is done (issue 25): `label` and `plan` read
pipeline/config.py, `export` reads export_corpus's signature, `plan`'s own options pipeline/commands/plan.py."""

from __future__ import annotations

import enum
import inspect

import typer


def _params(name: str) -> dict:
    from cli.main import app

    return {p.name: p for p in typer.main.get_command(app).commands[name].params}


def test_export_defaults_are_export_corpus_defaults():
    from pipeline.export import export_corpus

    sig = inspect.signature(export_corpus).parameters
    same = 0
    for name, p in _params("export").items():
        if name in sig and sig[name].default is not inspect.Parameter.empty:
            want = sig[name].default
            got = p.default.value if isinstance(p.default, enum.Enum) else p.default
            if name == "reward_tokens":
                got = tuple(got.split(","))
            assert got == want, (name, got, want)
            same += 1
    assert same >= 10


def test_plan_defaults_come_from_the_config_and_the_planner():
    from cli.help import help_text
    from pipeline.commands import plan as planner
    from pipeline.config import option_default

    ps = _params("plan")
    for name in ("strategy", "k", "max_new_tokens", "temperature", "backend", "device", "model", "input"):
        assert ps[name].default is None  # unset: the config decides
        assert "(default: " in help_text(ps[name]), name
    for name in ("strategy", "k", "max_new_tokens", "temperature", "backend", "device"):
        assert f"(default: {option_default(name)})" in help_text(ps[name]), name
    sig = inspect.signature(planner.plan).parameters
    assert ps["pilot"].default == sig["pilot"].default == planner.DEFAULT_PILOT
    assert ps["gpu_tokens_per_s"].default == sig["gpu_tokens_per_s"].default


def test_label_choices_are_the_configs():
    from cli.help import choices
    from pipeline.options import STRATEGIES

    assert choices(_params("label")["strategy"]) == list(STRATEGIES)
    assert choices(_params("plan")["strategy"]) == list(STRATEGIES)
