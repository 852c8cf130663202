"""The bundled model (data/model) loads with the Auto classes, round-trips its prompt format and solves a
fresh problem on CPU in under a second, in a form the grader and the exact checker read."""

from __future__ import annotations

import json

import pytest

from graders import extract_answer, grade
from pipeline.bundled import MODEL_DIR, SAMPLE_PATH
from pipeline.bundled.generator import generate_problems
from pipeline.bundled.synthetic import (
    PROMPT_TEMPLATE,
    check_steps,
    parse_latex_value,
    prefix_prompt,
    split_completion,
)

pytestmark = pytest.mark.skipif(not (MODEL_DIR / "model.safetensors").exists(), reason="data/model not built")


@pytest.fixture(scope="module")
def bundled():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(MODEL_DIR)
    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR).eval()
    return torch, tok, model


def test_architecture_and_size():
    cfg = json.loads((MODEL_DIR / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    total = sum(p.stat().st_size for p in MODEL_DIR.iterdir())
    assert total < 20 * 2**20


def test_tokenizer_round_trips_prompt_format(bundled):
    _, tok, _ = bundled
    problem = "Compute (23 + 17) * 3 - 48 / 6."
    steps = ["23 + 17 = 40", "7/3 - -5 = 22/3", "The answer is \\boxed{-\\frac{7}{3}}."]
    text = prefix_prompt(problem, steps, len(steps) - 1)
    ids = tok.encode(text, add_special_tokens=False)
    assert len(ids) == len(text)  # one token per character
    assert tok.decode(ids) == text
    assert tok.eos_token == "<eos>" and tok.eos_token_id is not None
    assert tok.decode(ids + [tok.eos_token_id], skip_special_tokens=True) == text
    assert tok.pad_token_id != tok.eos_token_id


def test_generates_a_gradable_solution(bundled):
    """Behaviour only; how fast one solution is generated is measured by bench/bench_speed.py."""
    torch, tok, model = bundled
    row = generate_problems(1, seed=424242)[0]  # a seed no training or sample set uses
    enc = tok(PROMPT_TEMPLATE.format(problem=row["problem"]), return_tensors="pt", add_special_tokens=False)
    torch.manual_seed(0)
    with torch.no_grad():
        out = model.generate(
            **enc,
            do_sample=False,
            max_new_tokens=256,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
        )
    assert out[0, -1].item() == tok.eos_token_id, "the solution should end with EOS"
    text = tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    steps = split_completion(text)
    assert steps[-1].startswith("The answer is \\boxed{"), text
    answer = extract_answer(text)
    assert answer is not None and parse_latex_value(answer) is not None, text
    assert grade(row["answer"], text).correct is not None
    check_steps(row["problem"], steps)  # every line is readable by the checker (no exception)


def test_bundled_sample_matches_the_checker():
    rows = [json.loads(line) for line in SAMPLE_PATH.read_text().splitlines()]
    assert len(rows) == 300
    for r in rows[:50]:
        assert check_steps(r["problem"], r["steps"]).first_error == r["reference_first_error"]
    # An honest imperfect reasoner: some solutions are right, some are wrong.
    firsts = [r["reference_first_error"] for r in rows]
    assert 0.2 < firsts.count(-1) / len(rows) < 0.9
