"""``evaluate`` on hand-made corpora and references with known metric values."""

from __future__ import annotations

import json

import pytest

from pipeline.commands.evaluate import evaluate
from pipeline.solution import LabeledSolution, Solution, StepStats
from pipeline.storage.schema import to_table
from pipeline.storage.store import CorpusStore


def make_corpus(path, items):
    """items: list of (id, n_steps, labels, mc_values)."""
    labeled = []
    for sid, n, labels, values in items:
        stats = []
        for v in values:
            st = StepStats()
            if v is not None:
                st.total, st.correct = 4, int(round(v * 4))
            stats.append(st)
        fe = next((i for i, x in enumerate(labels) if x is False), -1)
        sol = Solution(id=sid, problem=f"problem {sid}", answer="1", steps=tuple(f"{sid} step {i}" for i in range(n)))
        labeled.append(LabeledSolution(sol, labels, stats, fe, fe == -1, rollouts=8, rollout_tokens=100,
                                       strategy="per-step"))
    store = CorpusStore(str(path))
    store.write_table("data/v00001/part-00000.parquet", to_table(labeled, 4))
    store.commit({"version": 1, "strategy": "per-step", "k": 4,
                  "shards": [{"path": "data/v00001/part-00000.parquet", "rows": len(labeled)}]})
    return labeled


def test_processbench_reference_metrics(tmp_path):
    out = tmp_path / "out"
    make_corpus(out, [
        ("a", 3, [True, False, False], [1.0, 0.0, 0.0]),   # ref error at 1 -> hit
        ("b", 3, [True, True, False], [1.0, 0.5, 0.0]),    # ref error at 1 -> miss (pred 2)
        ("c", 3, [True, True, True], [1.0, 1.0, 1.0]),     # ref correct -> hit
        ("d", 3, [False, True, True], [0.0, 0.75, 1.0]),   # ref correct -> miss
    ])
    ref = tmp_path / "ref.jsonl"
    ref.write_text("\n".join(json.dumps(r) for r in [
        {"id": "a", "steps": ["a step 0", "a step 1", "a step 2"], "label": 1},
        {"id": "b", "steps": ["b step 0", "b step 1", "b step 2"], "label": 1},
        {"id": "c", "steps": ["c step 0", "c step 1", "c step 2"], "label": -1},
        {"id": "d", "steps": ["d step 0", "d step 1", "d step 2"], "label": -1},
    ]) + "\n")
    m = evaluate(str(out), str(ref))
    assert m["solutions"] == 4 and m["solutions_with_error"] == 2
    assert m["acc_error"] == 0.5 and m["acc_correct"] == 0.5 and m["f1"] == 0.5
    # compared steps: a: 0,1 ; b: 0,1 ; c: 0,1,2 ; d: 0,1,2  -> 10 steps
    # hits: a 2, b 1 (step 1 predicted True but is wrong), c 3, d 2 -> 8
    assert m["steps_compared"] == 10
    assert m["step_accuracy"] == pytest.approx(0.8)
    # negative class: tp = a1 ; fp = d0 ; fn = b1
    assert m["error_precision"] == 0.5 and m["error_recall"] == 0.5
    # brier over the same 10 steps: a 0+0, b 0+0.25, c 0, d 1+0.0625+0 -> 1.3125/10
    assert m["brier"] == pytest.approx(1.3125 / 10)
    assert m["rollout_tokens"] == 400


def test_prm800k_ratings_and_matching_by_steps(tmp_path):
    out = tmp_path / "out"
    make_corpus(out, [("x", 4, [True, True, False, None], [1.0, 1.0, 0.0, None])])
    ref = tmp_path / "ref.jsonl"
    # no id: matched by steps; rating 0 is neutral (not an error) by default
    ref.write_text(json.dumps({"steps": [f"x step {i}" for i in range(4)], "ratings": [1, 0, -1, 1]}) + "\n")
    m = evaluate(str(out), str(ref))
    assert m["acc_error"] == 1.0 and m["acc_correct"] is None and m["f1"] is None
    assert m["step_accuracy"] == 1.0 and m["steps_compared"] == 3
    m2 = evaluate(str(out), str(ref), neutral_is_error=True)
    assert m2["acc_error"] == 0.0


def test_bad_reference_is_named(tmp_path):
    out = tmp_path / "out"
    make_corpus(out, [("x", 2, [True, True], [1.0, 1.0])])
    ref = tmp_path / "ref.jsonl"
    ref.write_text('{"id": "x", "steps": ["x step 0", "x step 1"], "label": 0}\n{"id": broken\n')
    with pytest.raises(ValueError, match="line 2"):
        evaluate(str(out), str(ref))
    ref.write_text('{"id": "zzz", "steps": ["q"], "label": 0}\n')
    with pytest.raises(ValueError, match="no row"):
        evaluate(str(out), str(ref))


def test_label_rules_from_the_stored_counts(tmp_path):
    """Issue 16: one corpus scored under every rule; hand-computed for hard and changepoint."""
    from pipeline.commands.evaluate import evaluate_rules
    from pipeline.labeling.rules import RULES

    out = tmp_path / "out"
    make_corpus(out, [
        ("a", 3, [True, False, False], [1.0, 0.0, 0.0]),   # 4/4, 0/4, 0/4
        ("b", 3, [True, True, False], [1.0, 0.5, 0.0]),    # 4/4, 2/4, 0/4
        ("c", 3, [True, True, True], [1.0, 1.0, 1.0]),
        ("d", 3, [False, True, True], [0.0, 0.75, 1.0]),   # 0/4 then live steps: not an error for changepoint
    ])
    ref = tmp_path / "ref.jsonl"
    ref.write_text("".join(json.dumps({"id": i, "steps": [f"{i} step {j}" for j in range(3)], "label": lab}) + "\n"
                           for i, lab in (("a", 1), ("b", 1), ("c", -1), ("d", -1))))
    stored = evaluate(str(out), str(ref))
    hard = evaluate(str(out), str(ref), label_rule="hard")
    assert stored["label_rule"] == "stored" and hard["label_rule"] == "hard"
    assert (hard["f1"], hard["step_accuracy"]) == (stored["f1"], stored["step_accuracy"]) == (0.5, pytest.approx(0.8))
    # changepoint: a -> 1 (hit), b -> 2 (miss), c -> -1, d -> -1 (hit): acc_error 0.5, acc_correct 1.0
    cp = evaluate(str(out), str(ref), label_rule="changepoint")
    assert cp["acc_error"] == 0.5 and cp["acc_correct"] == 1.0 and cp["f1"] == pytest.approx(2 / 3)
    assert cp["acc_error_se"] == pytest.approx((0.25 / 2) ** 0.5) and cp["acc_correct_se"] == 0.0
    # F1 by the delta method: dF1/d(acc_error) = 2 acc_correct^2 / (sum)^2 = 2/2.25
    assert cp["f1_se"] == pytest.approx(2 / 2.25 * (0.25 / 2) ** 0.5)
    assert cp["tokens_per_solution"] == 100 and cp["tokens_per_solution_se"] == 0.0
    ms = evaluate_rules(str(out), str(ref))
    assert [m["label_rule"] for m in ms] == list(RULES)
    with pytest.raises(ValueError, match="unknown label rule"):
        evaluate(str(out), str(ref), label_rule="nope")


def test_exact_checker_fast_parse_gives_the_full_parsers_trees():
    """Issue 17: parse_problem's fast path (plain ASCII text) gives the trees of the full parser, which a tab
    forces; texts outside the grammar still raise the full parser's errors."""
    from fractions import Fraction

    from pipeline.bundled.generator import generate_problems
    from pipeline.bundled.synthetic import parse_problem

    for p in generate_problems(200, 4, "hard") + generate_problems(200, 5, "easy"):
        text = p["problem"]
        assert parse_problem(text) == parse_problem(text.replace(" ", "\t"))
    assert parse_problem("Compute 2 - -3 * (4).") == ("-", Fraction(2), ("*", Fraction(-3), Fraction(4)))
    for bad in ("Compute -(3).", "Compute --3.", "Compute 2 ^ 3.", "Compute (2 + 3.", "Compute 2 3."):
        with pytest.raises(ValueError, match="synthetic problem"):
            parse_problem(bad)
