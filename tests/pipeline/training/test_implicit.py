"""The implicit PRM (``mcprm train --kind implicit``, pipeline/training/implicit.py): its score is what its
docstring says (a cumulative log-likelihood ratio over the solution's tokens, header and separators left out,
plus the bias), it saves as two plain causal LMs and loads back to the same scores."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from pipeline.bundled import DATA_DIR  # noqa: E402

MODEL = str(DATA_DIR / "model")


def _models():
    tok = transformers.AutoTokenizer.from_pretrained(MODEL)
    pol = transformers.AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32)
    ref = transformers.AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32)
    return tok, pol, ref


def _logprobs(model, ids):
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
    return [0.0] + [float(lp[t - 1, ids[t]]) for t in range(1, len(ids))]


def test_score_is_the_cumulative_log_ratio_over_the_solution_tokens():
    from pipeline.training.collate import PrmFormat, encode
    from pipeline.training.implicit import build
    from pipeline.training.score import predict_probs

    tok, pol, ref = _models()
    torch.manual_seed(0)
    with torch.no_grad():  # a policy that differs from its reference
        for p in pol.parameters():
            p.add_(0.02 * torch.randn_like(p))
    fmt = PrmFormat(separator="\n", step_suffix="")
    sep = tok.convert_tokens_to_ids("\n") if "\n" in tok.get_vocab() else tok.encode("\n", add_special_tokens=False)[0]
    model = build(pol, ref, sep, bias=0.3).eval()
    problem, steps = "Compute 4 + 9 - 1.", ["4 + 9 = 13", "13 - 1 = 12", "The answer is \\boxed{12}."]
    got = predict_probs(model, tok, fmt, sep, [(problem, steps), (problem, steps[:2])])
    enc = encode(tok, fmt, sep, problem, steps)
    lp_p, lp_r = _logprobs(pol, enc.input_ids), _logprobs(ref, enc.input_ids)
    want, acc = [], 0.3
    for t, tid in enumerate(enc.input_ids):
        if t >= enc.start and tid != sep:
            acc += lp_p[t] - lp_r[t]
        if t in enc.positions:
            want.append(1 / (1 + torch.exp(torch.tensor(-acc)).item()))
    assert enc.start > 0 and len(want) == len(steps)
    assert got[0] == pytest.approx(want, abs=1e-5)
    assert got[1] == pytest.approx(want[:2], abs=1e-5)  # a prefix scores as the same steps of the whole
    # the same model as its own reference: every log ratio is 0, the score is the bias alone
    same = build(ref, ref, sep, bias=-0.7).eval()
    flat = predict_probs(same, tok, fmt, sep, [(problem, steps)])[0]
    assert flat == pytest.approx([1 / (1 + 2.718281828 ** 0.7)] * 3, abs=1e-5)


def test_trains_saves_as_two_causal_lms_and_scores_the_same_after_loading(tmp_path):
    from pipeline.bundled.synthetic import exact_corpus
    from pipeline.training.options import TrainConfig
    from pipeline.training.score import load_prm, predict_probs
    from pipeline.training.train import train

    rows = [json.loads(x) for x in (DATA_DIR / "sample.jsonl").read_text().splitlines() if x.strip()][:60]
    exact_corpus(rows, tmp_path / "corpus")
    torch.set_num_threads(1)
    res = train(TrainConfig(corpus=str(tmp_path / "corpus"), output=str(tmp_path / "prm"), kind="implicit",
                            epochs=1, progress=False, seed=0))
    assert res.card["kind"] == "implicit"
    cfg = json.loads((tmp_path / "prm" / "config.json").read_text())["mcprm_prm"]
    assert cfg["kind"] == "implicit" and cfg["format"]["separator"] == "\n" and "bias" in cfg
    pol = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "prm")
    ref = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "prm" / "reference")
    base = transformers.AutoModelForCausalLM.from_pretrained(MODEL)
    # the reference is the base model, untouched; the policy was trained
    assert all(torch.equal(a, b) for a, b in zip(ref.state_dict().values(), base.state_dict().values()))
    assert not all(torch.equal(a, b) for a, b in zip(pol.state_dict().values(), base.state_dict().values()))
    prm = load_prm(str(tmp_path / "prm"), device="cpu")
    items = [(r["problem"], r["steps"]) for r in rows[:5]]
    a = predict_probs(prm.model, prm.tokenizer, prm.fmt, prm.sep_id, items)
    b = predict_probs(prm.model, prm.tokenizer, prm.fmt, prm.sep_id, items, batch_size=1)
    assert all(len(p) == len(s) for p, (_, s) in zip(a, items))
    assert all(x == pytest.approx(y, abs=1e-5) for pa, pb in zip(a, b) for x, y in zip(pa, pb))
    (tmp_path / "prm" / "reference" / "config.json").unlink()
    from pipeline.training.score import ScoreError

    with pytest.raises(ScoreError, match="reference"):
        load_prm(str(tmp_path / "prm"), device="cpu")
