"""docs/options.md's option table is the one `python -m cli.label` makes from the option declarations (no second copy)."""

from __future__ import annotations

import re
from pathlib import Path

OPTIONS_DOC = Path(__file__).resolve().parents[2] / "docs" / "options.md"


def test_docs_option_table_matches_the_field_docs():
    from cli.label import option_table

    m = re.search(r"<!-- options:[^\n]*-->\n(.*?)<!-- /options -->", OPTIONS_DOC.read_text(), re.S)
    assert m, "docs/options.md has no generated option table"
    assert m.group(1) == option_table(), "docs/options.md's option table is stale: regenerate it with `python -m cli.label`"


def test_every_label_option_has_its_help_from_the_config():
    import typer

    from cli.label import option_help
    from cli.main import app
    from pipeline.config import option_fields

    cmd = typer.main.get_command(app).commands["label"]
    helps = {p.name: p.help for p in cmd.params}
    for name, (f, _t) in option_fields().items():
        if f.metadata.get("cli", True):
            assert helps[name] == option_help(name), name


def _command(name: str):
    import typer

    from cli.main import app

    return typer.main.get_command(app).commands[name]


def test_a_label_option_is_its_one_declaration():
    """A new option touches one file: its flag, help, panel, docs row and default all come from its field."""
    import dataclasses

    from cli.label import option_table
    from cli.options import field_help
    from pipeline.config import SECTIONS, LabelConfig, option_fields, section_of, section_title
    from rollouts.options import field_default

    params = {p.name: p for p in _command("label").params}
    table = option_table()
    cfg = LabelConfig()
    for name, (f, _t) in option_fields().items():
        want_default = field_default(f)
        assert getattr(cfg, name) == want_default, name  # a run without the option gets the declared default
        assert getattr(getattr(cfg, section_of(name)), name) == want_default
        row_flag = f"--{name.replace('_', '-')}" if f.metadata.get("cli", True) else name
        assert f"| `{row_flag}`" in table and field_help(f).replace("|", "\\|") in table, name
        if not f.metadata.get("cli", True):
            assert name not in params, name
            continue
        p = params[name]
        assert p.default is None, name  # unset on the command line: the declaration decides, no second default
        assert p.help == field_help(f), name
        assert set(p.opts) == set(f.metadata.get("flags") or (row_flag,)), name
        assert p.rich_help_panel == section_title(section_of(name)), name
    assert set(option_fields()) == {f.name for cls in SECTIONS.values() for f in dataclasses.fields(cls)}


def test_a_section_has_one_name():
    """The section ``sampling`` is the class ``SamplingOptions``, the panel and the docs heading "Sampling"."""
    import re

    from cli.label import option_table
    from pipeline.config import SECTIONS, LabelConfig, option_fields, section_name, section_title
    from pipeline.options import SamplingOptions

    cfg = LabelConfig()
    for name, cls in SECTIONS.items():
        assert section_name(cls) == name and cls.__name__.lower() == name + "options"
        assert isinstance(getattr(cfg, name), cls)
        assert LabelConfig.__annotations__[name] in (cls, cls.__name__)
    panels = [p.rich_help_panel for p in _command("label").params if p.name in option_fields()]
    titles = [section_title(s) for s in SECTIONS]
    assert list(dict.fromkeys(panels)) == titles
    assert re.findall(r"^## (.+)$", option_table(), re.M) == titles
    assert section_name(SamplingOptions) == "sampling" and section_title("sampling") == "Sampling"
    assert section_title("vllm") == "vllm / sglang backends" and section_title("hf") == "hf backend"


def test_a_train_option_is_its_one_declaration():
    """``mcprm train`` declares each default once (TrainConfig's field): the command's option is unset (None)
    unless given, its help is the field's, and a TrainConfig built in Python has the same defaults."""
    import dataclasses

    from cli.options import field_help
    from pipeline.training.options import TrainConfig
    from rollouts.options import field_default

    params = {p.name: p for p in _command("train").params}
    cfg = TrainConfig(corpus="c")
    fields = [f for f in dataclasses.fields(TrainConfig) if f.metadata.get("cli", True)]
    assert set(params) - {"corpus", "version"} == {f.name for f in fields} and len(fields) >= 30
    for f in fields:
        p = params[f.name]
        assert p.default is None and p.help == field_help(f), f.name
        assert getattr(cfg, f.name) == field_default(f), f.name
    assert params["corpus"].param_type_name == "argument" and "version" in params


def test_train_builds_its_config_from_only_the_options_given(monkeypatch, tmp_path):
    """What the command hands ``train()``: the declared defaults, with the given options (and no others) set."""
    import dataclasses

    from typer.testing import CliRunner

    import cli.train
    import pipeline.training.train as training
    from cli.main import app
    from pipeline.training.options import TrainConfig

    seen = []
    monkeypatch.setattr(training, "train", lambda cfg, progress_lines=False: seen.append((cfg, progress_lines)) or
                        (_ for _ in ()).throw(RuntimeError("stop here")))
    monkeypatch.setattr(cli.train, "repeat_warnings", lambda corpus, version: None)
    monkeypatch.setattr(cli.train, "free_gpus", lambda what: None)
    CliRunner().invoke(app, ["train", str(tmp_path / "c"), "--epochs", "2", "--no-drop-after-first-error",
                             "--separator", "\\n", "--output", str(tmp_path / "p")])
    assert len(seen) == 1
    cfg, lines = seen[0]
    want = TrainConfig(corpus=str(tmp_path / "c"), output=str(tmp_path / "p"), epochs=2.0,
                       drop_after_first_error=False, separator="\n", progress=False)
    # progress: on by default (plain lines), a bar only on a terminal (CliRunner's stderr is not one)
    assert lines is True and dataclasses.asdict(cfg) == dataclasses.asdict(want)


def test_a_new_strategy_is_one_registry_entry(monkeypatch):
    """A strategy registered in pipeline/labeling/strategies.py is a --strategy choice (its help and the config's
    check), runs and sizes shards, with no list elsewhere to extend."""
    import pytest
    import typer

    import cli.label
    from cli.help import choices
    from pipeline.config import ConfigError, LabelConfig
    from pipeline.execution.sizing import solution_cost
    from pipeline.labeling import strategies as S

    def every_other(n_steps, solution_correct, p):
        yield [S.Probe(i, p.k) for i in range(0, max(0, n_steps - 1), 2)]
        return S.StrategyOutcome(labels=[None] * n_steps, stats=[], first_error=-1)

    with pytest.raises(ConfigError, match="--strategy must be one of"):
        LabelConfig(strategy="every-other")
    monkeypatch.setitem(S.STRATEGIES, "every-other", S.Strategy("every-other", every_other, lambda n: n / 2,
                                                                trusts_correct=False,
                                                                reads=frozenset({"wave_size"})))
    cfg = LabelConfig(strategy="every-other")  # the config's check reads the registry
    assert cfg.effective_trust_correct() is False  # the strategy's own default of --trust-correct
    assert solution_cost("every-other")(10) == 5.0
    assert [pr.step for pr in next(S.make_strategy("every-other", 5, None, S.StrategyParams(k=3)))] == [0, 2]
    # the strategies' options it reads are its entry's: their setting is part of its corpus's identity, no
    # list beside the options to extend; the ones it does not read leave the identity alone
    assert cfg.identity() != cfg.replace(wave_size=3).identity()
    assert cfg.identity() == cfg.replace(bisect_fraction=0.5, target_confidence=0.8).identity()
    monkeypatch.setitem(S.STRATEGIES, "every-other", S.Strategy("every-other", every_other))
    assert cfg.identity() == cfg.replace(wave_size=3).identity()
    monkeypatch.setattr(cli.label.label_cmd, "__signature__", cli.label._signature())
    app = typer.Typer()
    cli.label.register(app)
    strategy = {p.name: p for p in typer.main.get_command(app).params}["strategy"]
    assert choices(strategy) == ["per-step", "binary-search", "adaptive", "sequential", "every-other"]


def test_the_strategies_options_are_read_by_a_registered_strategy():
    """Every option declared ``strategy_option`` is read by some strategy, and a strategy reads only those."""
    import dataclasses

    from pipeline.labeling.strategies import STRATEGIES
    from pipeline.options import LabelingOptions

    scoped = {f.name for f in dataclasses.fields(LabelingOptions) if f.metadata.get("strategy_option")}
    read = set().union(*(s.reads for s in STRATEGIES.values()))
    assert scoped == read and "wave_size" in scoped and not STRATEGIES["per-step"].reads
