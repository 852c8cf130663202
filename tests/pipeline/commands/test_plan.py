"""``mcprm plan``: a real pilot run (in-process, a real model) extrapolated to the whole input."""

from __future__ import annotations

import json

import pytest

from pipeline.bundled import MODEL_DIR, SAMPLE_PATH
from pipeline.commands.plan import bootstrap_ci, plan, sample_solutions
from pipeline.config import ConfigError, LabelConfig


def _rows(n: int) -> list[dict]:
    rows = []
    for i in range(n):
        a, b, c = i + 2, i + 3, 2
        steps = [f"{a} + {b} = {a + b}", f"{a + b} * {c} = {(a + b) * c}"][: 1 + i % 2]
        val = a + b if len(steps) == 1 else (a + b) * c
        expr = f"{a} + {b}" if len(steps) == 1 else f"({a} + {b}) * {c}"
        rows.append({"id": f"r{i}", "problem": f"Compute {expr}.", "answer": str(val),
                     "steps": steps + [f"The answer is \\boxed{{{val}}}."]})
    return rows


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(input path, model path): the bundled ones when the model exists, else a tiny random Llama."""
    d = tmp_path_factory.mktemp("plan")
    if (MODEL_DIR / "config.json").exists() and SAMPLE_PATH.exists():
        return str(SAMPLE_PATH), str(MODEL_DIR)
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.pipeline.prm_fixtures import char_tokenizer

    torch.manual_seed(0)
    tok = char_tokenizer(extra_special=())
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    model_dir = d / "model"
    LlamaForCausalLM(cfg).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    inp = d / "in.jsonl"
    rows = _rows(40)
    rows.append(dict(rows[0]))  # a duplicate is counted once
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(inp), str(model_dir)


def test_plan_extrapolates_a_real_pilot(setup, tmp_path):
    inp, model = setup
    cfg = LabelConfig(input=[inp], model=model, k=2, max_new_tokens=8, strategy="per-step", progress=False)
    res = plan(cfg, pilot=6, gpu_tokens_per_s=1000.0, seed=3, engines=3, workdir=str(tmp_path))
    n, sample = sample_solutions(cfg.resolved(), 6, seed=3)
    assert res.solutions == n and res.pilot == 6 == len(sample)
    # per-step without trust_correct: exactly K continuations from every step but the last
    expected_rollouts = sum(2 * (len(s.steps) - 1) for s in sample) / 6
    assert res.rollouts.per_solution == pytest.approx(expected_rollouts)
    for e in (res.rollouts, res.tokens, res.gpu_hours):
        assert e.per_solution > 0 and e.total > 0
        assert e.per_solution_ci[0] <= e.per_solution <= e.per_solution_ci[1]
        assert e.total_ci[0] <= e.total <= e.total_ci[1]
        assert e.total == pytest.approx(e.per_solution * n)
    assert res.gpu_hours.total == pytest.approx(res.tokens.total / 1000.0 / 3600)
    # each of the 3 engines holds its GPU for the start-up the pilot measured (loading this model took time)
    assert 0 < res.start_seconds < res.pilot_seconds
    start_h = 3 * res.start_seconds / 3600
    assert res.gpu_hours_incl_start.total == pytest.approx(res.gpu_hours.total + start_h)
    assert res.gpu_hours_incl_start.per_solution == pytest.approx(res.gpu_hours.per_solution + start_h / n)
    assert res.gpu_hours_incl_start.total_ci[0] == pytest.approx(res.gpu_hours.total_ci[0] + start_h)
    assert res.tokens.per_solution <= res.rollouts.per_solution * 8  # at most max_new_tokens per rollout
    assert res.pilot_seconds > 0 and res.pilot_tokens_per_s > 0
    assert list(tmp_path.iterdir()) == []  # the pilot's temp corpus is gone


def test_pilot_sample_is_deterministic_and_deduplicated(setup):
    inp, model = setup
    cfg = LabelConfig(input=[inp], model=model).resolved()
    n, a = sample_solutions(cfg, 5, seed=1)
    _, b = sample_solutions(cfg, 5, seed=1)
    _, c = sample_solutions(cfg, 5, seed=2)
    assert [s.key for s in a] == [s.key for s in b] != [s.key for s in c]
    assert len({s.key for s in a}) == 5
    if inp.endswith("in.jsonl"):
        assert n == 40  # 41 rows, one duplicate


def test_bootstrap_ci():
    lo, hi = bootstrap_ci([1.0, 2.0, 3.0, 4.0, 100.0], seed=0)
    assert lo < 22.0 < hi  # the mean
    assert bootstrap_ci([5.0, 5.0, 5.0]) == (5.0, 5.0)


def test_plan_rejects_bad_options(setup):
    inp, model = setup
    cfg = LabelConfig(input=[inp], model=model)
    with pytest.raises(ConfigError, match="--pilot"):
        plan(cfg, pilot=1)
    with pytest.raises(ConfigError, match="--gpu-tokens-per-s"):
        plan(cfg, gpu_tokens_per_s=0)


def test_cli_plan_json(setup):
    from typer.testing import CliRunner

    from cli.main import app

    inp, model = setup
    r = CliRunner().invoke(app, ["plan", "--input", inp, "--model", model, "--k", "2", "--max-new-tokens", "4",
                                 "--pilot", "3", "--gpu-tokens-per-s", "500", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output[r.output.index("{"):])
    assert d["pilot"] == 3 and d["tokens"]["total"] > 0 and d["gpu_tokens_per_s"] == 500
