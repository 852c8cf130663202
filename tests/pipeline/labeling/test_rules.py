"""Label rules and uncertainty from stored counts (issue 16): hand-computed values."""

from __future__ import annotations

import math

import pytest

from pipeline.labeling.rules import (
    RULES,
    RuleParams,
    StepCount,
    apply_rule,
    changepoint,
    changepoint_posterior,
    confidence_of,
    get_rule,
    straddles,
)
from pipeline.stats.intervals import beta_cdf, wilson

# counts: step 0 0/8, step 1 2/8, step 2 0/8, last step = the solution's own (wrong) answer
STEPS = [StepCount(0, 8, 0.0, False), StepCount(2, 8, 0.25, True), StepCount(0, 8, 0.0, False),
         StepCount(0, 0, 0.0, False)]


def test_wilson_by_hand():
    # 1 of 8: centre (0.125 + z^2/16) / (1 + z^2/8) = 0.24666, half-width 0.22424
    lo, hi = wilson(1, 8)
    assert lo == pytest.approx(0.022417, abs=1e-5) and hi == pytest.approx(0.470888, abs=1e-5)
    lo, hi = wilson(0, 8)
    assert lo == 0.0 and hi == pytest.approx(0.324408, abs=1e-5)
    assert wilson(8, 8)[0] == pytest.approx(1 - 0.324408, abs=1e-5)
    assert wilson(0, 0) is None
    assert straddles(wilson(0, 8), 0.05) and not straddles(wilson(8, 8), 0.05) and not straddles(None)


def test_beta_cdf_closed_forms():
    # Beta(1/2, 3/2): CDF = (2/pi) (asin(sqrt x) + sqrt(x (1 - x)))
    for x in (0.01, 0.05, 0.3, 0.9):
        want = 2 / math.pi * (math.asin(math.sqrt(x)) + math.sqrt(x * (1 - x)))
        assert beta_cdf(x, 0.5, 1.5) == pytest.approx(want, abs=1e-9)
    assert beta_cdf(0.3, 2, 3) == pytest.approx(0.3483, abs=1e-9)  # 1 - sum_{j<2} C(4,j) .3^j .7^(4-j)
    assert beta_cdf(0.0, 2, 3) == 0.0 and beta_cdf(1.0, 2, 3) == 1.0


def test_jeffreys_below_and_confidence_of():
    # 0 of 1: Jeffreys posterior Beta(1/2, 3/2); P(p < 0.05) = 0.28231
    below = 2 / math.pi * (math.asin(math.sqrt(0.05)) + math.sqrt(0.05 * 0.95))
    assert beta_cdf(0.05, 0 + 0.5, 1 - 0 + 0.5) == pytest.approx(below, abs=1e-9)
    # the confidence of a first error is the stored posterior's entry (index 0: no error)
    row = {"first_error_posterior": [0.1, 0.6, 0.3]}
    assert confidence_of(row, -1) == pytest.approx(0.1) and confidence_of(row, 1) == pytest.approx(0.3)
    assert confidence_of(row, 2) is None and confidence_of({"first_error_posterior": None}, 0) is None


def test_hard_threshold_soft():
    r = get_rule("hard")(STEPS)
    assert r.labels == [False, True, False, False] and r.first_error == 0 and r.scores == [0.0, 1.0, 0.0, 0.0]
    r = get_rule("threshold")(STEPS, None, RuleParams(threshold=0.2))
    assert r.labels == [False, True, False, False] and r.first_error == 0
    r = get_rule("threshold")(STEPS, None, RuleParams(threshold=0.3))
    assert r.labels == [False] * 4
    r = get_rule("soft")(STEPS)
    assert r.labels == [False] * 4 and r.scores == [0.0, 0.25, 0.0, 0.0]


def test_relative_progress():
    # step 0 keeps its hard label (score 0.5); d_1 = +0.25; d_2 = -0.25 but dead after a live step; d_3 = 0
    r = get_rule("relative")(STEPS)
    assert r.labels == [False, True, False, True] and r.first_error == 0
    assert r.scores == pytest.approx([0.5, 0.625, 0.375, 0.5])
    steps = [StepCount(6, 8, 0.75, True), StepCount(1, 8, 0.125, True), StepCount(1, 8, 0.125, True)]
    r = get_rule("relative")(steps, None, RuleParams(delta=0.5))  # d_1 = -0.625 < -0.5: an error
    assert r.labels == [True, False, True] and r.first_error == 1


def test_advantage():
    # r_i = v_i + alpha (v_i - v_{i-1}): 0, 0.5, -0.25, 0
    r = get_rule("advantage")(STEPS)
    assert r.labels == [False, True, False, False] and r.scores == pytest.approx([0.0, 0.5, 0.0, 0.0])
    steps = [StepCount(4, 8, 0.5, True), StepCount(1, 8, 0.125, True)]
    r = get_rule("advantage")(steps, None, RuleParams(alpha=4.0))  # 0.125 + 4 (0.125 - 0.5) = -1.375
    assert r.labels == [True, False] and r.first_error == 1


def test_er_prm():
    # (1/eta) ln(1 - v + v e^eta) at v = 0.25, eta = 10: ln(5507.37) / 10 = 0.86138
    r = get_rule("er-prm")(STEPS)
    assert r.scores[1] == pytest.approx(0.861384, abs=1e-5) and r.labels == [False, True, False, False]
    r = get_rule("er-prm")(STEPS, None, RuleParams(eta=1e-6))  # eta -> 0: the soft label
    assert r.scores[1] == pytest.approx(0.25, abs=1e-5)


def test_changepoint_by_hand():
    # step 0: 1 of 1 (alive: Beta(.5,.5) mean 0.5; dead: eps 0.02); last step: own answer wrong (dead for sure)
    # L(no error) = 0, L(e=0) = 0.02 * 1, L(e=1) = 0.5 * 1  ->  P(e=1) = 0.5 / 0.52
    steps = [StepCount(1, 1, 1.0, True), StepCount(0, 0, 0.0, False)]
    post = changepoint_posterior(steps, False)
    assert post == pytest.approx([0.0, 0.02 / 0.52, 0.5 / 0.52])
    r = changepoint(steps, False)
    assert r.labels == [True, False] and r.first_error == 1
    assert r.confidence == pytest.approx(0.5 / 0.52) and r.extra["ties"] == 1
    # a 0-of-8 step followed by a live one is not the first error (hard says step 0)
    r = changepoint(STEPS, False)
    assert r.first_error == 2 and r.labels == [True, True, False, None]


def test_apply_rule_on_rows_keeps_unestimated_steps():
    # a trust-correct row: no counts, stored labels stand under every rule
    row = {"labels": [True, True, True], "mc_correct": [0, 0, 0], "mc_total": [0, 0, 0], "mc_ungradable": [0, 0, 0],
           "mc_value": [None, None, 1.0], "solution_correct": True}
    for name in RULES:
        r = apply_rule(row, name)
        assert r.labels == [True, True, True] and r.first_error == -1, name
    # a per-step row with an ungradable continuation: graded = total - ungradable
    row = {"labels": [True, False], "mc_correct": [1, 0], "mc_total": [4, 0], "mc_ungradable": [1, 0],
           "mc_value": [1 / 3, 0.0], "solution_correct": False}
    assert straddles(wilson(1, 3), 0.1) and not straddles(wilson(1, 3), 0.05)  # Wilson(1 of 3) = [0.061, 0.792]
    assert apply_rule(row, "hard").labels == [True, False]
    with pytest.raises(ValueError, match="unknown label rule"):
        get_rule("nope")


def _labeled():
    from pipeline.solution import LabeledSolution, Solution, StepStats

    stats = [StepStats(total=8, correct=1), StepStats(total=8, correct=0), StepStats()]
    sol = Solution(id="a", problem="p", answer="1", steps=("x", "y", "z"))
    return LabeledSolution(sol, [True, False, False], stats, 1, False, rollouts=16, rollout_tokens=160,
                           strategy="sequential", extra={"label_status": "budget"})


def _commit(out, table, schema_version, **extra):
    from pipeline.storage.store import CorpusStore

    store = CorpusStore(str(out))
    store.write_table("data/v00001/part-00000.parquet", table)
    store.commit({"version": 1, "schema_version": schema_version, "identity": "x", "strategy": "per-step", "k": 8,
                  "shards": [{"path": "data/v00001/part-00000.parquet", "rows": table.num_rows}],
                  "history": [{"version": 1}], **extra})


def test_schema_v4_columns(tmp_path):
    from pipeline.corpus import read_corpus
    from pipeline.stats.changepoint import RowCounts, posterior
    from pipeline.stats.intervals import clopper_pearson
    from pipeline.storage.confidence import FIT_COLUMNS, fit_model, model_of
    from pipeline.storage.schema import SCHEMA_VERSION, to_table

    assert SCHEMA_VERSION == 4
    t = to_table([_labeled()], 8)
    r = t.to_pylist()[0]
    # a fixed design (no design recorded): exact Clopper-Pearson intervals of the own draws
    assert r["mc_low"][0] == pytest.approx(clopper_pearson(1, 8)[0], abs=1e-6)
    assert r["mc_high"][1] == pytest.approx(clopper_pearson(0, 8)[1], abs=1e-6)
    assert r["mc_low"][2] is None and r["mc_high"][2] is None  # the last step: the own answer, no rollouts
    # the shard leaves the confidence null: it is filled on read from the version's fitted model
    assert r["first_error_confidence"] is None and r["first_error_posterior"] is None
    assert r["label_status"] == "budget"
    model = fit_model([t.select(FIT_COLUMNS)])
    _commit(tmp_path / "v4", t, 4, first_error_model=model)
    got = read_corpus(str(tmp_path / "v4")).to_pylist()[0]
    want = posterior(RowCounts(tuple(zip(r["mc_deep_correct"], r["mc_deep_total"])), False),
                     model_of({"first_error_model": model}))
    assert got["first_error_posterior"] == pytest.approx(want, abs=1e-6)
    assert got["first_error_confidence"] == pytest.approx(want[2], abs=1e-6)  # first_error 1 -> index 2
    # a projection that asks only for the confidence reads what it needs and returns what was asked
    only = read_corpus(str(tmp_path / "v4"), columns=["first_error_confidence"])
    assert only.column_names == ["first_error_confidence"]
    assert only.to_pylist()[0]["first_error_confidence"] == pytest.approx(want[2], abs=1e-6)


def test_schema_v2_corpus_stays_readable(tmp_path):
    from typer.testing import CliRunner

    from cli.main import app
    from pipeline.corpus import read_corpus
    from pipeline.labeling.rules import corpus_uncertainty
    from pipeline.storage.schema import ADDED_IN, to_table

    t = to_table([_labeled()], 8)
    t = t.drop_columns([c for c, v in ADDED_IN.items() if v > 2])
    _commit(tmp_path / "v2", t.replace_schema_metadata({b"mcprm_schema_version": b"2"}), 2)
    assert read_corpus(str(tmp_path / "v2"), verify=True).num_rows == 1  # the v2 schema is what verify expects
    u = corpus_uncertainty(str(tmp_path / "v2"))
    # a corpus written before schema 3 stores no interval and no confidence: none is made up (the sampling
    # design that produced its counts is not recorded, so an interval could be wrong)
    assert u["uncertain_steps"] is None and u["mean_first_error_confidence"] is None
    res = CliRunner().invoke(app, ["stats", str(tmp_path / "v2")])
    assert res.exit_code == 0, res.output
    assert "uncertain labels" in res.output and "n/a (written before schema 3)" in res.output
