"""Targets from label rules, the split by problem, the base-model default, score input checks, genprm records."""

from __future__ import annotations

import json

import pytest

from pipeline.export.formats.genprm import critique_target, parse_target
from pipeline.judge.reply import critique_prompt
from pipeline.training.base import default_base_model
from pipeline.training.options import TrainConfig, TrainError
from pipeline.training.score import ScoreError, labels_from_scores, read_solutions
from pipeline.training.targets import problem_group, row_targets


def _row(**kw):
    row = {"id": "r", "problem": "Compute 1 + 2 * 3.", "steps": ["2 * 3 = 6", "1 + 6 = 8", "The answer is 8."],
           "labels": [True, False, False], "mc_correct": [3, 0, 0], "mc_total": [4, 4, 0],
           "mc_ungradable": [0, 0, 0], "mc_value": [0.75, 0.0, 0.0], "first_error": 1, "solution_correct": False}
    row.update(kw)
    return row


def test_row_targets_hard_soft_and_outcome():
    t, fe, conf = row_targets(_row(), "hard")
    assert t == [1.0, 0.0, 0.0] and fe == 1 and 0.0 <= conf <= 1.0
    t, fe, _ = row_targets(_row(), "soft", "soft")
    assert t == [0.75, 0.0, 0.0] and fe == 1
    t, fe, conf = row_targets(_row(), "outcome")
    assert t == [0.0, 0.0, 0.0] and fe == 0 and conf == 1.0
    t, fe, _ = row_targets(_row(solution_correct=True, labels=[True, True, True], mc_value=[1.0, 1.0, 1.0],
                                mc_correct=[4, 4, 0]), "outcome")
    assert t == [1.0, 1.0, 1.0] and fe == -1
    t, fe, conf = row_targets(_row(solution_correct=None), "outcome")
    assert t == [None, None, None] and conf == 0.0


def test_every_solution_of_a_problem_is_on_one_side_of_the_split_and_the_share_is_right():
    assert problem_group("Compute 1 + 2.") == problem_group("  Compute 1 + 2.  ")
    groups = [problem_group(f"Compute {i} + {i * 7 % 13}.") for i in range(4000)]
    assert all(0 <= g < 1 for g in groups)
    share = sum(g < 0.1 for g in groups) / len(groups)
    assert abs(share - 0.1) < 0.015  # binomial SD at n = 4000 is 0.0047


def _manifest(tmp_path, **m):
    d = tmp_path / "c"
    (d / "versions").mkdir(parents=True)
    base = {"format": "mcprm-corpus", "version": 1, "shards": [], "strategy": "per-step", "k": 4}
    base.update(m)
    (d / "manifest.json").write_text(json.dumps(base))
    (d / "versions" / "v00001.json").write_text(json.dumps(base))
    return str(d)


def test_default_base_model_from_the_manifest(tmp_path):
    from pipeline import bundled

    assert default_base_model(_manifest(tmp_path, config={"model": ""})) == str(bundled.model_dir())
    c = _manifest(tmp_path / "a", config={"prompting": {"model": "/models/x", "backend": "hf"}})
    assert default_base_model(c) == "/models/x"
    c = _manifest(tmp_path / "b", config={"model": "gpt-x", "backend": "openai"})
    with pytest.raises(TrainError, match="--base-model"):
        default_base_model(c)
    c = _manifest(tmp_path / "d", strategy="prm", config={})
    with pytest.raises(TrainError, match="mcprm score"):
        default_base_model(c)


def test_train_config_names_the_bad_option():
    with pytest.raises(TrainError, match="--label-rule"):
        TrainConfig("c", "o", label_rule="nope").validate()
    with pytest.raises(TrainError, match="--val-fraction"):
        TrainConfig("c", "o", val_fraction=1.0).validate()
    with pytest.raises(TrainError, match="--targets"):
        TrainConfig("c", "o", targets="fuzzy").validate()


def test_read_solutions_checks_every_row_and_names_it(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"id": "a", "problem": "P1", "steps": ["x", "y"], "answer": 3}\n'
                 '{"problem": "P2", "steps": ["z"]}\n'
                 '{"id": "c", "problem": "", "steps": ["z"]}\n'
                 '{"id": "d", "problem": "P4", "steps": "not a list"}\n'
                 '{"id": "a", "problem": "P5", "steps": ["q"]}\n')
    with pytest.raises(ScoreError) as e:
        read_solutions([str(p)])
    msg = str(e.value)
    assert "3 bad row(s)" in msg and "line 3" in msg and "'problem'" in msg and "line 4" in msg
    assert "line 5" in msg and "already used" in msg
    p.write_text('{"id": "a", "problem": "P1", "steps": ["x", "y"], "answer": 3}\n{"problem": "P2", "steps": ["z"]}\n')
    rows = read_solutions([str(p)])
    assert [r.answer for r in rows] == ["3", None] and rows[1].id  # an id from the content when none is given


def test_labels_from_scores():
    assert labels_from_scores([0.9, 0.3, None, 0.8], 0.5) == ([True, False, None, True], 1)
    assert labels_from_scores([0.9, 0.6], 0.5) == ([True, True], -1)
    # the answer's grade labels the last step (the label pipeline's last_step_label): a wrong answer is an
    # error even where the PRM saw none, a right one is not
    assert labels_from_scores([0.9, 0.6, 0.7], 0.5, solution_correct=False) == ([True, True, False], 2)
    assert labels_from_scores([0.9, 0.6, 0.2], 0.5, solution_correct=True) == ([True, True, True], -1)
    assert labels_from_scores([0.9, 0.3, 0.2], 0.5, solution_correct=True) == ([True, False, True], 1)
    # --trust-correct: a right answer is error-free, whatever the scores; a wrong one keeps the PRM's first error
    assert labels_from_scores([0.9, 0.3, 0.2], 0.5, True, trust_correct=True) == ([True, True, True], -1)
    assert labels_from_scores([0.9, 0.3, 0.8], 0.5, False, trust_correct=True) == ([True, False, False], 1)
    assert labels_from_scores([0.9, 0.3, 0.8], 0.5, None, trust_correct=True) == ([True, False, True], 1)


def test_scoring_follows_the_training_corpus_on_right_answers():
    from pipeline.training.score import corpus_trusts_correct

    assert corpus_trusts_correct({"corpus": {"strategy": "binary-search", "trust_correct": True}})
    assert not corpus_trusts_correct({"corpus": {"strategy": "binary-search", "trust_correct": False}})
    assert not corpus_trusts_correct({"corpus": {"strategy": "per-step", "trust_correct": None}})
    # a card written before trust_correct was recorded: the strategy's default
    assert corpus_trusts_correct({"corpus": {"strategy": "binary-search"}})
    assert corpus_trusts_correct({"corpus": {"strategy": "adaptive"}})
    assert not corpus_trusts_correct({"corpus": {"strategy": "per-step"}}) and not corpus_trusts_correct({})


@pytest.mark.parametrize("fe", [-1, 0, 2])
def test_genprm_target_reads_back(fe):
    steps = ["a", "b", "c"]
    t = critique_target(fe, len(steps))
    assert parse_target(t) == fe
    assert t.count("is correct.") == (len(steps) if fe == -1 else fe)
    p = critique_prompt("Compute 1.", steps)
    assert "<paragraph_2>\nc\n</paragraph_2>" in p and p.rstrip().endswith("\\boxed{}.")
    with pytest.raises(ValueError):
        parse_target("no index")


def test_separator_and_suffix_as_typed_on_a_command_line():
    from cli.train import _unescape

    assert _unescape("\\n") == "\n" and _unescape("") == "" and _unescape("<extra_0>") == "<extra_0>"
    assert _unescape("ки") == "ки" and _unescape("a\\tb") == "a\tb"
