"""``mcprm eval`` on scored corpora (written by ``mcprm score``'s own table and commit code, with known scores):
the protocol's numbers from ``prm_score`` only, label rules refused, and the paired comparison of two PRMs."""

from __future__ import annotations

import json

import pytest

from pipeline.commands.evaluate import EvalError, compare, evaluate, evaluate_rules
from pipeline.storage.store import CorpusStore
from pipeline.training.score import ScoreRow, _commit, _table

# (id, steps' scores, reference first error)
ITEMS = [
    ("a", [0.9, 0.2, 0.1], 1),   # error at 1, scores drop there
    ("b", [0.8, 0.7, 0.3], 2),
    ("c", [0.9, 0.95, 0.9], -1),
    ("d", [0.6, 0.4, 0.9], -1),  # a false alarm at 0.5, not at 0.35
    ("e", [0.3, 0.2], 0),
    ("f", [0.99, 0.97], -1),
]


def scored_corpus(path, items=ITEMS, threshold=0.35, use_answer_key=False, scale=1.0):
    rows = [ScoreRow(i, f"problem {i}", [f"{i} step {j}" for j in range(len(p))], "1", "in.jsonl:1", {})
            for i, p, _fe in items]
    probs = [[min(1.0, x * scale) for x in p] for _i, p, _fe in items]
    correct = [fe == -1 for _i, _p, fe in items]
    table = _table(rows, probs, correct, threshold, use_answer_key, False)
    _commit(CorpusStore(str(path)), table, 100, {"prm": "prm-dir", "input": ["in.jsonl"], "threshold": threshold,
                                                 "prm_threshold": threshold, "use_answer_key": use_answer_key},
            0.1, len(rows))
    return str(path)


def reference(path, items=ITEMS):
    path.write_text("".join(json.dumps({"id": i, "steps": [f"{i} step {j}" for j in range(len(p))], "label": fe})
                            + "\n" for i, p, fe in items))
    return str(path)


def test_scored_corpus_gets_the_protocol_from_its_scores(tmp_path):
    out = scored_corpus(tmp_path / "s")
    m = evaluate(out, reference(tmp_path / "ref.jsonl"))
    p = m["prm"]
    assert p["solutions"] == 6 and p["solutions_with_error"] == 3
    # at 0.35: a -> 1 (hit), b -> 2 (hit), c -1 (hit), d -1 (hit), e -> 0 (hit), f hit: F1 1
    assert p["own_threshold"] == 0.35 and p["f1_own"] == 1.0
    # at 0.5: d is flagged at step 1 (0.4): acc_correct 2/3, acc_error 1 -> 0.8
    assert p["f1_at_0.5"] == pytest.approx(0.8)
    # steps up to the reference error: good 0.9, 0.8, 0.7, 0.9, 0.95, 0.9, 0.6, 0.4, 0.9, 0.99, 0.97;
    # wrong 0.2, 0.3, 0.3: 0.3 (e's step 0) ties b's step 2; every good step is above both
    assert p["step_auroc"] == 1.0
    assert p["f1_oracle"] == 1.0
    assert m["labels_use_answer_key"] is False
    # the stored labels at the threshold the corpus was scored with agree here
    assert m["f1"] == 1.0


def test_the_protocol_ignores_labels_set_by_the_answer_key(tmp_path):
    plain = evaluate(scored_corpus(tmp_path / "p"), reference(tmp_path / "ref.jsonl"))
    keyed = evaluate(scored_corpus(tmp_path / "k", use_answer_key=True), reference(tmp_path / "ref.jsonl"))
    assert keyed["labels_use_answer_key"] is True
    assert keyed["prm"] == plain["prm"]


def test_label_rules_on_a_scored_corpus_are_refused(tmp_path):
    out = scored_corpus(tmp_path / "s")
    ref = reference(tmp_path / "ref.jsonl")
    for rule in ("changepoint", "hard"):
        with pytest.raises(EvalError, match="written by `mcprm score`.*Leave out --label-rule"):
            evaluate(out, ref, label_rule=rule)
    with pytest.raises(EvalError):
        evaluate_rules(out, ref)


def test_compare_two_scored_corpora_of_the_same_solutions(tmp_path):
    ref = reference(tmp_path / "ref.jsonl")
    good = scored_corpus(tmp_path / "good")
    flat = [(i, [0.5] * len(p), fe) for i, p, fe in ITEMS]  # says nothing
    worse = scored_corpus(tmp_path / "flat", items=flat, threshold=0.5)
    c = compare(good, worse, ref, bootstrap=300, seed=1)
    d = c["differences"]
    assert c["solutions"] == 6 and c["only_in_first"] == 0
    assert d["step_auroc"]["difference"] == pytest.approx(0.5)
    assert d["step_auroc"]["low"] <= 0.5 <= d["step_auroc"]["high"]
    assert c == compare(good, worse, ref, bootstrap=300, seed=1)
    with pytest.raises(EvalError, match="labeled corpus"):
        from tests.pipeline.commands.test_evaluate import make_corpus

        make_corpus(tmp_path / "lab", [("a", 3, [True, False, False], [1.0, 0.0, 0.0])])
        compare(str(tmp_path / "lab"), good, ref)


def test_cli_eval_scored_and_compare(tmp_path):
    import subprocess
    import sys

    ref = reference(tmp_path / "ref.jsonl")
    good = scored_corpus(tmp_path / "good")
    other = scored_corpus(tmp_path / "other", scale=0.9)
    run = [sys.executable, "-m", "cli.main", "eval"]
    r = subprocess.run([*run, good, "--reference", ref], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "step AUROC" in r.stdout and "cross-fitted" in r.stdout
    r = subprocess.run([*run, good, "--reference", ref, "--label-rule", "changepoint"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 1 and "Leave out --label-rule" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([*run, good, "--reference", ref, "--compare", other, "--bootstrap", "200", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert set(got["differences"]) == {"step_auroc", "f1_at_0.5", "f1_own", "f1_cross"}
