"""PRM training end to end with the real bundled model, real files and real `mcprm` commands: label -> train -> score
-> eval / stats / export / report, resume, best-of-N over generated solutions, and the errors a user can make."""

from __future__ import annotations

import json

import pytest

from pipeline.bundled import PROBLEMS_PATH, SAMPLE_PATH

from .conftest import invoke_mcprm, run_mcprm

pytestmark = pytest.mark.slow  # real label, train, score and generate processes (started first: tests/conftest.py)

ONE = {"OMP_NUM_THREADS": "1"}  # tiny model: one thread is fastest on a shared 2-core machine


# Commands that only read a corpus and print, and every call expected to fail (a message and an exit code), run
# in this process; label, train, score and generate are real `mcprm` processes, but for the variants of a score
# already run as a process (``here=True``: the same command with other options, its output read from its files).
IN_PROCESS = ("eval", "stats", "export", "report", "bestofn")


def mcprm(*args, ok=True, here=False):
    run = invoke_mcprm if here or args[0] in IN_PROCESS or not ok else run_mcprm
    r = run(*args, env=ONE)
    if ok:
        assert r.returncode == 0, f"mcprm {' '.join(args)}\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def labeled(tmp_path_factory):
    d = tmp_path_factory.mktemp("train")
    rows = SAMPLE_PATH.read_text().splitlines()[:24]
    inp = d / "solutions.jsonl"
    inp.write_text("".join(x + "\n" for x in rows))
    mcprm("label", "--input", str(inp), "--output", str(d / "corpus"), "--k", "2", "--strategy", "per-step",
          "--max-new-tokens", "48", "--executor", "local", "-q")
    return d, inp


@pytest.fixture(scope="module")
def trained(labeled):
    d, inp = labeled
    # the head kind (a token-classification model); the default kind for the bundled model is implicit
    # (tests/pipeline/training/test_implicit.py, and test_default_kind_is_resolved_by_model_size below)
    mcprm("train", str(d / "corpus"), "--output", str(d / "prm"), "--kind", "head", "--epochs", "1",
          "--batch-size", "8", "--val-fraction", "0.3", "--no-progress")
    return d / "prm"


def test_default_kind_is_resolved_by_model_size():
    from pipeline.bundled import MODEL_DIR
    from pipeline.training.base import count_parameters
    from pipeline.training.options import TINY_PARAMS, TrainConfig

    n = count_parameters(str(MODEL_DIR))
    assert 0 < n < TINY_PARAMS
    cfg = TrainConfig(corpus="c", output="o")
    assert cfg.kind == "auto" and cfg.weight_by_confidence is None
    small, large = cfg.resolved(n), cfg.resolved(TINY_PARAMS)
    assert (small.kind, small.weight_by_confidence) == ("implicit", True)
    assert (large.kind, large.weight_by_confidence) == ("head", False)
    given = TrainConfig(corpus="c", output="o", kind="head", weight_by_confidence=True).resolved(n)
    assert (given.kind, given.weight_by_confidence) == ("head", True)  # what the user gave wins
    assert TrainConfig(corpus="c", output="o").resolved(n).layout() == ("\n", "")  # implicit reads the newline
    # class weights for both kinds; the outcome threshold where it was measured (implicit), 0.5 for the head
    assert (small.class_balance, small.threshold_rule) == (True, "outcome")
    assert (large.class_balance, large.threshold_rule) == (True, "0.5")
    given = TrainConfig(corpus="c", output="o", kind="head", class_balance=False, threshold_rule="f1").resolved(n)
    assert (given.class_balance, given.threshold_rule) == (False, "f1")


def test_trained_prm_loads_with_plain_transformers_and_has_its_card(labeled, trained):
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    d, _ = labeled
    card = json.loads((trained / "mcprm_card.json").read_text())
    assert card["corpus"]["path"] == str(d / "corpus") and card["corpus"]["version"] == 1
    assert card["label_rule"] == "hard" and card["separator"] == "<extra_0>"
    data = card["data"]
    assert data["train_rows"] + data["val_rows"] == data["rows"] == 24
    assert data["train_problems"] > 0 and data["val_problems"] > 0  # the split is by problem
    assert 0 < card["threshold"] < 1 and "threshold" in (trained / "README.md").read_text()
    m = AutoModelForTokenClassification.from_pretrained(trained)  # no remote code
    t = AutoTokenizer.from_pretrained(trained)
    assert m.config.num_labels == 2 and type(m).__name__ == "LlamaForTokenClassification"
    prm = m.config.mcprm_prm
    fmt = prm["format"]
    steps = ["4 - 4 = 0", "4 + 9 = 13", "The answer is \\boxed{13}."]
    text = fmt["header"].replace("{problem}", "Compute 4 - 4 + 9.") + "".join(
        s + fmt["step_suffix"] + fmt["separator"] for s in steps)
    ids = t(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    assert (ids == prm["separator_id"]).sum().item() == len(steps)
    with torch.no_grad():
        p = torch.softmax(m(input_ids=ids).logits, -1)[0, :, 1]
    assert p.shape[0] == ids.shape[1]


def test_score_writes_a_corpus_that_eval_stats_export_and_report_read(labeled, trained, tmp_path):
    d, inp = labeled
    fresh = tmp_path / "new.jsonl"  # new solutions; one without a gold answer (scored all the same)
    rows = [json.loads(x) for x in SAMPLE_PATH.read_text().splitlines()[100:112]]
    rows[0].pop("answer")
    fresh.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "scored"
    r = mcprm("score", str(trained), "--input", str(fresh), "--output", str(out))
    assert "12 solutions" in r.stdout
    from pipeline.corpus import read_corpus

    t = read_corpus(str(out)).to_pylist()
    assert [x["id"] for x in t] == [x["id"] for x in rows]
    card = json.loads((trained / "mcprm_card.json").read_text())
    assert card["corpus"]["trust_correct"] is False  # a per-step corpus
    thr = card["threshold"]
    for x in t:  # the PRM's labels alone: its scores at its threshold, whatever the answer key says
        assert x["strategy"] == "prm" and x["k"] == 0 and x["rollouts"] == 0
        assert len(x["prm_score"]) == len(x["steps"]) and all(0 <= p <= 1 for p in x["prm_score"])
        want = [p >= thr for p in x["prm_score"]]
        assert x["labels"] == want
        assert x["first_error"] == next((i for i, ok in enumerate(want) if not ok), -1)
        assert x["mc_value"] == [None] * len(x["steps"]) and x["first_error_confidence"] is None
    # the same labels and first errors without gold answers in the input
    keyless = tmp_path / "keyless.jsonl"
    keyless.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "answer"}) + "\n" for r in rows))
    mcprm("score", str(trained), "--input", str(keyless), "--output", str(tmp_path / "keyless"), here=True)
    for x, y in zip(t, read_corpus(str(tmp_path / "keyless")).to_pylist(), strict=True):
        assert (y["labels"], y["first_error"]) == (x["labels"], x["first_error"])
        assert y["solution_correct"] is None
    # --use-answer-key: the labels' conventions (the answer's grade labels the last step; --trust-correct makes a
    # right answer error-free), named in the manifest
    r = mcprm("score", str(trained), "--input", str(fresh), "--output", str(tmp_path / "x"), "--trust-correct",
              ok=False)
    assert r.returncode == 1 and "--use-answer-key" in r.stderr
    keyed = tmp_path / "keyed"
    mcprm("score", str(trained), "--input", str(fresh), "--output", str(keyed), "--use-answer-key", here=True)
    assert json.loads((keyed / "manifest.json").read_text())["config"]["use_answer_key"] is True
    for x, y in zip(t, read_corpus(str(keyed)).to_pylist(), strict=True):
        want = list(x["labels"])
        if x["solution_correct"] is not None:
            want[-1] = x["solution_correct"]
        assert y["labels"] == want
    trusted = tmp_path / "trusted"
    mcprm("score", str(trained), "--input", str(fresh), "--output", str(trusted), "--use-answer-key",
          "--trust-correct", here=True)
    for x, y in zip(t, read_corpus(str(trusted)).to_pylist(), strict=True):
        assert y["prm_score"] == pytest.approx(x["prm_score"], abs=1e-5)
        if x["solution_correct"] is True:
            assert y["labels"] == [True] * len(x["steps"]) and y["first_error"] == -1
    assert t[0]["solution_correct"] is None and all(x["solution_correct"] is not None for x in t[1:])
    assert {x["solution_correct"] for x in t[1:]} == {True, False}  # both kinds of graded rows are checked
    # the same probabilities as the PRM read in this process
    from pipeline.training.score import load_prm, predict_probs

    prm = load_prm(str(trained), device="cpu")
    again = predict_probs(prm.model, prm.tokenizer, prm.fmt, prm.sep_id, [(x["problem"], x["steps"]) for x in t])
    for x, p in zip(t, again, strict=True):
        assert x["prm_score"] == pytest.approx(p, abs=1e-5)

    ev = json.loads(mcprm("eval", str(out), "--json").stdout)
    assert ev["solutions"] == 12 and ev["strategy"] == "prm" and ev["rollouts"] == 0
    from pipeline.bundled.synthetic import check_steps
    from pipeline.training.metrics import first_error_f1

    want = first_error_f1([x["first_error"] for x in t], [check_steps(x["problem"], x["steps"]).first_error for x in t])
    assert ev["f1"] == want["f1"] and ev["acc_error"] == want["acc_error"]
    # the protocol, from prm_score alone: at the PRM's own threshold it is the stored labels' F1 (no answer key)
    assert ev["labels_use_answer_key"] is False and ev["prm"]["own_threshold"] == thr
    assert ev["prm"]["f1_own"] == ev["f1"] and ev["prm"]["solutions"] == 12
    r = mcprm("eval", str(out), "--label-rule", "changepoint", ok=False)
    assert r.returncode == 1 and "Leave out --label-rule" in r.stderr
    assert "prm" in mcprm("stats", str(out)).stdout
    mcprm("export", str(out), "--format", "trl", "--output", str(tmp_path / "trl"))
    mcprm("report", str(out), "--output", str(tmp_path / "report"))
    # a scored corpus is never written over, and never over labels
    r = mcprm("score", str(trained), "--input", str(fresh), "--output", str(out), ok=False)
    assert r.returncode == 1 and "--overwrite" in r.stderr
    r = mcprm("score", str(trained), "--input", str(fresh), "--output", str(d / "corpus"), "--overwrite", ok=False)
    assert r.returncode == 1 and "labeled corpus" in r.stderr


def test_genprm_export_targets_are_the_first_errors(labeled, tmp_path):
    d, _ = labeled
    out = tmp_path / "genprm"
    mcprm("export", str(d / "corpus"), "--format", "genprm", "--output", str(out), "--file-format", "jsonl")
    from pipeline.corpus import read_corpus
    from pipeline.export.formats.genprm import parse_target
    from tests.export_files import load_export

    recs = load_export(str(out))
    corpus = {r["id"]: r for r in read_corpus(str(d / "corpus")).to_pylist()}
    assert len(recs) == len(corpus)
    for rec in recs:
        row = corpus[rec["id"]]
        assert rec["label"] == row["first_error"] == parse_target(rec["completion"])
        assert row["problem"] in rec["prompt"] and all(f"<paragraph_{i}>\n{s}\n" in rec["prompt"]
                                                       for i, s in enumerate(row["steps"]))


def test_resume_goes_on_from_the_last_checkpoint(labeled, trained, tmp_path):
    d, _ = labeled
    out = tmp_path / "prm"
    assert not (trained / "checkpoints").exists()  # none unless asked
    # a finished 1-epoch training whose checkpoints were asked for and kept
    mcprm("train", str(d / "corpus"), "--output", str(out), "--kind", "head", "--epochs", "1", "--batch-size", "8",
          "--val-fraction", "0.3", "--no-progress", "--save-steps", "1", "--keep-checkpoints")
    assert any((out / "checkpoints").glob("checkpoint-*"))
    first = json.loads((out / "mcprm_card.json").read_text())
    args = ("train", str(d / "corpus"), "--output", str(out), "--batch-size", "8", "--val-fraction", "0.3",
            "--no-progress", "--epochs", "2", "--save-steps", "1")
    r = mcprm(*args, ok=False)
    assert r.returncode == 1 and "--overwrite" in r.stderr  # a finished PRM is not replaced silently
    r = mcprm(*args, "--resume", ok=False)  # the default kind for the bundled model is implicit, these are head's
    assert r.returncode == 1 and "resume with --kind head" in r.stderr and "Traceback" not in r.stderr
    args = (*args, "--kind", "head")
    mcprm(*args, "--resume")
    card = json.loads((out / "mcprm_card.json").read_text())
    assert card["training"]["steps"] == 2 * first["training"]["steps"]  # one more epoch, not two
    assert card["data"] == first["data"]
    assert not (out / "checkpoints").exists()  # the finished run's checkpoints went


def test_best_of_n_over_generated_solutions(trained, tmp_path):
    probs = tmp_path / "problems.jsonl"
    probs.write_text("".join(x + "\n" for x in PROBLEMS_PATH.read_text().splitlines()[:6]))
    sols = tmp_path / "solutions.jsonl"
    mcprm("generate", "--input", str(probs), "--output", str(sols), "--n", "4", "--max-new-tokens", "160")
    mcprm("score", str(trained), "--input", str(sols), "--output", str(tmp_path / "scored"))
    res = json.loads(mcprm("bestofn", str(tmp_path / "scored"), "--json").stdout)
    assert res["problems"] == 6 and res["solutions"] == 24
    by_n = {r["n"]: r["selectors"] for r in res["results"]}
    assert sorted(by_n) == [1, 2, 4]
    for sel in by_n.values():
        ceiling = sel["pass@N"]["accuracy"]
        assert all(v["accuracy"] <= ceiling + 1e-12 for v in sel.values())
    one = by_n[1]  # N = 1: every selector picks the only solution
    assert len({round(v["accuracy"], 12) for v in one.values()}) == 1
    # the table a person reads
    assert "majority" in mcprm("bestofn", str(tmp_path / "scored")).stdout
    # best-of-N needs PRM scores
    r = mcprm("bestofn", str(tmp_path / "nothing"), ok=False)
    assert r.returncode == 1 and "error" in r.stderr.lower()


def test_user_errors_are_one_clear_line(labeled, trained, tmp_path):
    d, inp = labeled
    r = mcprm("train", str(tmp_path / "nope"), "--output", str(tmp_path / "p"), ok=False)
    assert r.returncode == 1 and "not an mcprm corpus" in r.stderr and "Traceback" not in r.stderr
    r = mcprm("train", str(d / "corpus"), "--output", str(tmp_path / "p"), "--base-model", str(tmp_path / "no-model"),
              ok=False)
    assert r.returncode == 1 and "base model" in r.stderr and "Traceback" not in r.stderr
    r = mcprm("train", str(d / "corpus"), "--output", str(tmp_path / "p"), "--label-rule", "bogus", ok=False)
    assert r.returncode == 1 and "--label-rule" in r.stderr
    r = mcprm("score", str(d / "corpus"), "--input", str(inp), "--output", str(tmp_path / "s"), ok=False)
    assert r.returncode == 1 and "not a PRM" in r.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem": "Compute 1 + 1.", "steps": ["1 + 1 = 2"]}\n{"problem": "Compute 2 + 2.", "steps": []}\n')
    r = mcprm("score", str(trained), "--input", str(bad), "--output", str(tmp_path / "s"), ok=False)
    assert r.returncode == 1 and "line 2" in r.stderr and "steps" in r.stderr
    assert not (tmp_path / "s").exists()  # nothing written
