"""The one config object: validation messages, run files, identity (meaning vs performance knobs)."""

from __future__ import annotations

import pytest

from pipeline.config import ConfigError, LabelConfig


def test_validation_names_the_option():
    with pytest.raises(ConfigError, match="--k must be at least 1"):
        LabelConfig(k=0).validate()
    with pytest.raises(ConfigError, match="--strategy must be one of"):
        LabelConfig(strategy="greedy").validate()
    with pytest.raises(ConfigError, match="--base-url"):
        LabelConfig(backend="openai").validate()


def test_run_file_and_overrides(tmp_path):
    f = tmp_path / "run.yaml"
    f.write_text("k: 4\nmax-new-tokens: 99\nstrategy: adaptive\ninput: a.jsonl\n")
    c = LabelConfig.from_file(str(f), k=6)
    assert (c.k, c.max_new_tokens, c.strategy, c.input) == (6, 99, "adaptive", ["a.jsonl"])
    f.write_text("kk: 4\n")
    with pytest.raises(ConfigError, match="unknown option 'kk'"):
        LabelConfig.from_file(str(f))
    with pytest.raises(ConfigError, match="does not exist"):
        LabelConfig.from_file(str(tmp_path / "nope.yaml"))


def test_identity_ignores_performance_knobs_only():
    a = LabelConfig(model="m", k=8)
    assert a.identity() == LabelConfig(model="m", k=8, num_workers=7, shard_size=3, ray_address="x").identity()
    for change in (dict(k=4), dict(temperature=0.5), dict(seed=1), dict(strategy="adaptive"),
                   dict(model="other"), dict(max_new_tokens=10), dict(grader="exact")):
        assert LabelConfig(**{"model": "m", "k": 8, **change}).identity() != a.identity(), change


def test_cli_reads_config_file(tmp_path):
    from typer.testing import CliRunner

    from cli.main import app

    f = tmp_path / "run.yaml"
    f.write_text("k: 0\n")
    r = CliRunner().invoke(app, ["label", "--config", str(f), "--output", str(tmp_path / "o")])
    assert r.exit_code == 1 and "--k must be at least 1" in r.output


def test_unknown_vllm_engine_is_refused():
    with pytest.raises(ConfigError, match="--vllm-engine must be one of loop, async, offline"):
        LabelConfig(output="x", backend="vllm", vllm_engine="turbo").validate()
