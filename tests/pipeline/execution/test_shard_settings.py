"""The settings a run's stages read are built once from its LabelConfig and frozen: the scheduler gets one
:class:`SchedulerSettings` (not its fields one by one), the prompt format and sampling come from the config's own
sections, and every option the scheduler reads reaches it with its value."""

from __future__ import annotations

import dataclasses

import pytest

from pipeline.config import LabelConfig
from pipeline.execution.shard_worker import scheduler_settings
from pipeline.labeling.scheduler import Scheduler, SchedulerSettings
from pipeline.labeling.strategies import StrategyParams
from rollouts.base import SamplingConfig


def test_every_option_the_scheduler_reads_reaches_it():
    cfg = LabelConfig(model="m", strategy="binary-search", k=6, wave_size=3, seed=7, temperature=0.5, top_p=0.9,
                      max_new_tokens=40, max_batch_requests=9, reuse_rollouts=False, unreadable="exclude",
                      tail_fill=5, speculate=False, prompt_format="plain", step_separator="\n--\n")
    prompt = cfg.prompt_builder()
    s = scheduler_settings(cfg, prompt)
    assert (s.strategy, s.seed, s.max_batch_requests, s.reuse, s.unreadable, s.tail_fill) == (
        "binary-search", 7, 9, False, "exclude", 5)
    assert s.params.k == 6 and s.params.wave_size == 3 and s.params.speculate is False
    assert s.sampling == SamplingConfig(temperature=0.5, top_p=0.9, max_new_tokens=40, stop=prompt.stop)
    assert prompt.stop and "a\n--\nb" in prompt.prefix("p", ["a", "b"])  # the format's own stops; its separator
    assert s.streaming is False  # hf: the backend's description says it does not stream


def test_every_strategy_option_reaches_the_strategies_by_its_name():
    """Each option declared a strategy's (``strategy_option``) is a field of StrategyParams of the same name and
    arrives there as set: a value other than its default for each, all at once."""
    from pipeline.config import LabelConfig as C
    from pipeline.execution.shard_worker import strategy_params
    from pipeline.options import LabelingOptions, SamplingOptions

    names = [f.name for f in dataclasses.fields(StrategyParams)]
    declared = [f.name for sec in (LabelingOptions, SamplingOptions) for f in dataclasses.fields(sec)
                if f.metadata.get("strategy_option")]
    other = {"k": 7, "wave_size": 3, "wave_growth": 1.5, "confidence_width": 0.2, "early_stop": False,
             "target_confidence": 0.8, "max_tokens_per_solution": 999, "bisect_fraction": 0.4, "speculate": False,
             "relative_drop": 0.1, "reach_gate": True, "trust_pass_rate": 0.3, "unreached_claim": "step1",
             "reach_probe": "step1"}
    p = strategy_params(C(model="m", strategy="binary-search", trust_correct=False, **other))
    for name, v in other.items():
        assert getattr(p, name) == v, name
    assert p.trust_correct is False and strategy_params(C(model="m", relative_drop=0.0)).relative_drop is None
    assert set(other) | {"trust_correct", "eps"} == set(names)  # a new field is added here too, with its option
    assert declared and set(declared) <= set(names)


def test_settings_are_frozen_and_the_scheduler_reads_them():
    s = SchedulerSettings("per-step", StrategyParams(k=2), seed=3, streaming=True, tail_fill=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.seed = 4  # type: ignore[misc]
    sched = Scheduler(object(), lambda pairs: [], object(), s)
    assert sched.settings is s
    assert (sched.strategy, sched.params.k, sched.seed, sched.streaming, sched.tail_fill) == ("per-step", 2, 3, True, 4)
    # reuse needs the backend's prompt encoder: asked for without one, nothing is reused
    assert Scheduler(object(), lambda pairs: [], object(), dataclasses.replace(s, reuse=True)).reuse is False
    assert Scheduler(object(), lambda pairs: [], object(), dataclasses.replace(s, reuse=True), encode=list).reuse


def test_vllm_draws_ahead_under_its_engines_capacity_unless_told():
    """vLLM's tail fill is the sequences its worker's engines run at once (the capacity the backend states), 256
    where it states none; --tail-fill N is N on any backend; hf draws nothing ahead."""
    vllm = LabelConfig(model="m", backend="vllm")
    prompt = vllm.prompt_builder()
    assert scheduler_settings(vllm, prompt, capacity=2048).tail_fill == 2048
    assert scheduler_settings(vllm, prompt, capacity=1024).tail_fill == 1024
    assert scheduler_settings(vllm, prompt).tail_fill == 256
    told = LabelConfig(model="m", backend="vllm", tail_fill=300)
    assert scheduler_settings(told, prompt, capacity=2048).tail_fill == 300
    off = LabelConfig(model="m", backend="vllm", tail_fill=0)
    assert scheduler_settings(off, prompt, capacity=2048).tail_fill == 0
    hf = LabelConfig(model="m")
    assert scheduler_settings(hf, hf.prompt_builder(), capacity=2048).tail_fill == 0
