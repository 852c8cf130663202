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
    with pytest.raises(ConfigError, match="--shards-per-worker must be at least 1"):
        LabelConfig(shards_per_worker=0).validate()


def test_shards_per_worker_defaults_to_the_backends():
    # vllm keeps two shards per worker (no idle tail between shards); hf one; the option overrides either
    assert (LabelConfig(backend="vllm").worker_shards, LabelConfig().worker_shards) == (2, 1)
    assert LabelConfig(backend="vllm", shards_per_worker=6).worker_shards == 6


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
    assert a.identity() == LabelConfig(model="m", k=8, num_workers=7, shard_size=3, ray_address="x",
                                                shards_per_worker=5).identity()
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


def test_missing_checks_are_made_at_construction():
    with pytest.raises(ConfigError, match=r"--top-p must be in \(0, 1\]"):
        LabelConfig(top_p=0)
    with pytest.raises(ConfigError, match=r"--top-p must be in \(0, 1\]"):
        LabelConfig(top_p=1.5)
    assert LabelConfig(top_p=1.0).top_p == 1.0
    with pytest.raises(ConfigError, match="--grader-timeout must be > 0"):
        LabelConfig(grader_timeout=0)
    with pytest.raises(ConfigError, match="--grader: no grader named 'nope'"):
        LabelConfig(grader="nope")


# The identity of a configuration as every corpus written so far computed it (the flat config of mcprm 0.x):
# these 19 options, the effective trust_correct, the model's fingerprint and the grader version, as sorted JSON.
_LEGACY_IDENTITY_FIELDS = (
    "model", "tokenizer", "prompt_format", "prompt_template", "step_separator", "strategy", "k", "temperature",
    "top_p", "max_new_tokens", "seed", "grader", "grader_timeout", "wave_size", "confidence_width", "trust_correct",
    "early_stop", "load_format", "ignore_eos",
)


LEGACY = dict(bisect_fraction=0.5, reuse_rollouts=False, relative_drop=0.0, unreadable="exclude", wave_growth=1.0)  # labeling before these options existed


def _legacy_identity(c: LabelConfig) -> str:
    import hashlib
    import json

    from graders import get_grader
    from pipeline.config import model_fingerprint

    d = {f: getattr(c, f) for f in _LEGACY_IDENTITY_FIELDS}
    d["trust_correct"] = c.strategy != "per-step" if c.trust_correct is None else bool(c.trust_correct)
    d["model"] = model_fingerprint(c.model)
    if c.tokenizer:
        d["tokenizer"] = model_fingerprint(c.tokenizer)
    d["grader_version"] = get_grader(c.grader).version
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


@pytest.mark.parametrize("options", [
    {}, dict(model="m", k=4), dict(strategy="adaptive", confidence_width=0.2),
    dict(strategy="binary-search", trust_correct=False, early_stop=False),
    dict(model="m", tokenizer="t", top_p=0.9, temperature=0.7, seed=3, grader="exact", grader_timeout=5.0,
         load_format="dummy", ignore_eos=True, prompt_format="chat", step_separator="\n",
         prompt_template="P: {problem}", wave_size=4, max_new_tokens=12),
    dict(model="m", backend="vllm", vllm_engine="async", tensor_parallel_size=2, num_workers=3, shard_size=5),
])
def test_identity_of_an_unchanged_configuration_is_what_it_was(options):
    """Existing corpora resume only if the same settings hash to the same identity, byte for byte. Options added
    later with another default (issue 16: rollout reuse, the probe point) are set to what labeling did before
    them; K is given where the legacy default (8) is meant."""
    options = {"k": 8, **options, **LEGACY}
    c = LabelConfig(**options)
    assert c.identity() == _legacy_identity(c)
    r = c.resolved()
    assert r.identity() == _legacy_identity(r)


def test_identity_value_is_pinned(monkeypatch):
    from types import SimpleNamespace

    import graders

    monkeypatch.setattr(graders, "get_grader", lambda name="sympy": SimpleNamespace(version="v1"))
    # the same value as before the config tree (per-step was the default strategy then: binary-search since
    # issue 16, so an old default corpus is refreshed with --strategy per-step)
    assert LabelConfig(model="m", strategy="per-step", k=8, **LEGACY).identity() == "64689128caa15f70"
    assert LabelConfig(model="m").identity() != "64689128caa15f70"
    # issue 16's defaults (K=20, probe point 0.6, rollout reuse, relative drop) each make another configuration
    old = LabelConfig(model="m", k=8, **LEGACY)
    for change in (dict(k=20), dict(bisect_fraction=0.6), dict(reuse_rollouts=True), dict(relative_drop=0.25)):
        assert LabelConfig(**{"model": "m", "k": 8, **LEGACY, **change}).identity() != old.identity(), change
    ident = LabelConfig(model="m").identity_dict()
    assert (ident["k"], ident["bisect_fraction"], ident["reuse_rollouts"], ident["relative_drop"]) == (20, 0.6, True,
                                                                                                      0.25)
    assert "reuse_rollouts" not in old.identity_dict() and "bisect_fraction" not in old.identity_dict()
    # binary-search's own options are no part of another strategy's identity: an old per-step corpus is refreshed
    # with --strategy per-step --k 8 --no-reuse-rollouts --unreadable exclude (a schema-3 corpus is relabeled with
    # --overwrite anyway: pipeline.run refuses to mix schema versions in one corpus version)
    assert (LabelConfig(model="m", strategy="per-step", k=8, reuse_rollouts=False, unreadable="exclude").identity()
            == LabelConfig(model="m", strategy="per-step", k=8, **LEGACY).identity())


# The identity fields of a corpus made with today's defaults: the data run's corpus "def", version 1 (1,500
# solutions labeled on an H200 by mcprm 0563913 with bench/gpu_e2e/data_run.sh's label command; its manifest's
# identity_fields, as written). Later versions of that corpus are added by newer code, which must compute the
# same identity from the same command, or the refresh is refused.
_DEF_CORPUS_IDENTITY = "1b6ceb9723a617f1"
_DEF_CORPUS_IDENTITY_FIELDS = {
    "model": "qwen@254f0ece3b51", "tokenizer": None, "prompt_format": "chat",
    "prompt_template": "Solve the following math problem step by step. Put the final answer in \\boxed{}.\n\n{problem}",
    "step_separator": None, "load_format": "auto", "k": 20, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 512,
    "seed": 0, "ignore_eos": False, "strategy": "binary-search", "wave_size": 2, "wave_growth": 2.0,
    "confidence_width": None, "trust_correct": True, "early_stop": True, "bisect_fraction": 0.6,
    "relative_drop": 0.25, "reuse_rollouts": True, "grader": "sympy", "grader_timeout": 2.0, "unreadable": "failure",
    "grader_version": "sympy-3",
}


def _configs_label_builds(monkeypatch, *arg_lists) -> list:
    """The LabelConfig `mcprm label` builds from each argument list, caught before anything runs."""
    from typer.testing import CliRunner

    import pipeline.run
    from cli.main import app

    seen = []

    def fake_label(cfg):
        seen.append(cfg)
        raise RuntimeError("stop here")

    monkeypatch.setattr(pipeline.run, "label", fake_label)
    monkeypatch.setattr("cli.label.preflight", lambda cfg, output=True: None)  # vllm on a machine without a GPU
    for args in arg_lists:
        CliRunner().invoke(app, ["label", *args])
    return seen


def test_a_default_corpus_made_before_keeps_its_identity(tmp_path, monkeypatch):
    """The data run's label command, parsed by the CLI, hashes to the identity its corpus "def" was written with,
    also with the engine's speed options of later code set (engines per GPU, CUDA graphs, batch limits: no part of
    what a label means). A failure here means every corpus labeled with the defaults can no longer be refreshed:
    an option added since must be declared ``identity="non-default"`` (with ``legacy`` if labeling did otherwise
    before it), unless the labels' meaning really changed, and then the data run's corpora start afresh."""
    import pipeline.config

    # the model folder the data run converts on the GPU machine is not here: its fingerprint, as recorded
    monkeypatch.setattr(pipeline.config, "model_fingerprint",
                        lambda m: _DEF_CORPUS_IDENTITY_FIELDS["model"] if m == "/tmp/qwen" else m)
    run = ["--input", "a.jsonl", "--output", str(tmp_path / "c_def"), "--no-progress", "--backend", "vllm",
           "--model", "/tmp/qwen", "--prompt-format", "chat",
           "--prompt-template", _DEF_CORPUS_IDENTITY_FIELDS["prompt_template"], "--max-new-tokens", "512",
           "--max-model-len", "4096"]
    speed = ["--engines-per-gpu", "2", "--cuda-graph-max", "0", "--max-num-seqs", "256"]
    seen = _configs_label_builds(monkeypatch, run, run + speed)
    assert len(seen) == 2 and seen[1].engines_per_gpu == 2
    for cfg in seen:
        assert cfg.identity_dict() == _DEF_CORPUS_IDENTITY_FIELDS
        assert cfg.identity() == _DEF_CORPUS_IDENTITY


def test_tree_sections_and_flat_names():
    from pipeline.config import SECTIONS, option_fields

    c = LabelConfig(input=["a.jsonl"], k=4, backend="vllm", vllm_engine="offline", grader="exact")
    assert (c.sampling.k, c.vllm.vllm_engine, c.grading.grader, c.reading.input) == (4, "offline", "exact",
                                                                                      ["a.jsonl"])
    assert c.backend_options is c.vllm and c.backend_spec.name == "vllm"
    c.k = 6  # a flat name sets the option in its section, in this config only
    d = c.replace(seed=2)
    assert (c.sampling.k, d.k, d.seed, c.seed) == (6, 6, 2, 0)
    d.k = 7
    assert c.k == 6
    with pytest.raises(TypeError, match="unknown option"):
        LabelConfig(kk=1)
    with pytest.raises(AttributeError):
        c.kk = 1
    # every option is declared once, with its documentation
    for name, (f, _t) in option_fields().items():
        assert f.metadata.get("help"), name
    assert set(SECTIONS) >= {"reading", "writing", "prompting", "sampling", "labeling", "grading", "execution",
                             "hf", "vllm", "openai"}
    assert "api_key" not in LabelConfig(backend="openai", base_url="http://x", api_key="secret").to_dict()


def test_cli_and_run_file_build_the_same_tree(tmp_path, monkeypatch):
    args = ["--k", "3", "--strategy", "adaptive", "--top-p", "0.5", "--backend", "vllm", "--vllm-engine", "async",
            "--no-early-stop", "--input", "a.jsonl", "--output", str(tmp_path / "o")]
    f = tmp_path / "run.yaml"
    f.write_text(f"k: 3\nstrategy: adaptive\ntop-p: 0.5\nbackend: vllm\nvllm_engine: async\nearly-stop: false\n"
                 f"input: a.jsonl\noutput: {tmp_path / 'o'}\n")
    seen = _configs_label_builds(monkeypatch, args, ["--config", str(f)])
    assert len(seen) == 2 and seen[0] == seen[1] and seen[0].vllm.vllm_engine == "async"


def test_help_descriptions_come_from_the_field_docs():
    from cli.label import option_help
    from pipeline.config import option_fields

    f, _ = option_fields()["k"]
    assert option_help("k") == f.metadata["help"] + " (default: 20)"


def test_config_imports_no_concrete_backend():
    import subprocess
    import sys

    code = ("import sys, pipeline.config; "
            "print([m for m in ('rollouts.hf', 'rollouts.vllm_backend', 'rollouts.openai_backend') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_vllm_engine_environment():
    from pipeline.config import ConfigError
    from rollouts.options import VLLMOptions
    from rollouts.registry import _vllm_env

    assert _vllm_env(VLLMOptions()) == {}
    env = _vllm_env(VLLMOptions(deterministic=True, vllm_inproc=True, compile_cache="~/cc"))
    assert env["VLLM_BATCH_INVARIANT"] == "1" and env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert env["VLLM_CACHE_ROOT"].endswith("/cc") and "~" not in env["VLLM_CACHE_ROOT"]
    with pytest.raises(ConfigError, match="--vllm-inproc needs --vllm-engine loop or offline"):
        LabelConfig(output="x", backend="vllm", vllm_engine="async", vllm_inproc=True).validate()
    LabelConfig(output="x", backend="vllm", vllm_inproc=True).validate()


def test_identity_counts_an_option_only_for_the_strategies_that_read_it(monkeypatch):
    from types import SimpleNamespace

    import graders

    monkeypatch.setattr(graders, "get_grader", lambda name="sympy": SimpleNamespace(version="v1"))

    def ident(strategy, **change):
        return LabelConfig(model="m", strategy=strategy, k=8, **change).identity()

    # (option, a non-default value, the strategies whose labels it changes)
    scoped = [
        ("wave_size", 4, {"binary-search", "adaptive", "sequential"}),
        ("early_stop", False, {"binary-search"}),
        ("confidence_width", 0.3, {"binary-search", "adaptive"}),
        ("target_confidence", 0.8, {"sequential"}),
        ("max_tokens_per_solution", 100, {"sequential"}),
        ("bisect_fraction", 0.5, {"binary-search"}),
    ]
    for strategy in ("per-step", "binary-search", "adaptive", "sequential"):
        for name, value, readers in scoped:
            changed = ident(strategy, **{name: value}) != ident(strategy)
            assert changed == (strategy in readers), (strategy, name)
    # a scoped option another strategy ignores is recorded at its default: the per-step identity stays the one
    # every earlier per-step corpus computed (test_identity_value_is_pinned), whatever --wave-size says
    assert LabelConfig(model="m", strategy="per-step", wave_size=7).identity_dict()["wave_size"] == 2
    # the weights' dtype changes the logits, so the labels: part of the identity once set (None = the model's own,
    # as every corpus before it was counted)
    assert "dtype" not in LabelConfig(model="m").identity_dict()
    assert ident("per-step", dtype="bfloat16") != ident("per-step")
