"""Reach gating end to end with the real bundled model: label invariants, determinism under another sharding,
mcprm train's handling of unreached rows, mcprm stats' count of them, and the stored confidence of an unreached
row's claim against the bundled task's exact checker."""

from __future__ import annotations

import json
import math

import pytest

from pipeline.bundled import SAMPLE_PATH
from pipeline.corpus import read_corpus
from pipeline.solution import REACH_STATUSES, REACH_TRUSTED, UNREACHED

from .conftest import make_cfg, rows_by_key, run_mcprm

N = 40
K = 4


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    from pipeline.run import label

    rows = [json.loads(x) for x in SAMPLE_PATH.read_text().splitlines()[:N]]
    inp = tmp_path_factory.mktemp("rg") / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    outs = []
    for shard_size in (7, N):
        out = str(tmp_path_factory.mktemp("rg") / "out")
        label(make_cfg(str(inp), out, strategy="binary-search", reach_gate=True, k=K, shard_size=shard_size,
                       seed=20261201))
        outs.append(out)
    return rows, outs


@pytest.mark.timeout(900)
def test_label_invariants_and_status(gated):
    _rows, (out, _) = gated
    t = rows_by_key(read_corpus(out))
    m = json.load(open(f"{out}/manifest.json"))
    assert m["counts"]["rollouts"] == sum(r["rollouts"] for r in t.values())
    statuses = [r["label_status"] for r in t.values()]
    assert set(statuses) <= set(REACH_STATUSES) and len(statuses) == N
    assert UNREACHED in statuses and REACH_TRUSTED in statuses  # the bundled model fails some, solves others
    for r in t.values():
        labels = r["labels"]
        fe = next((i for i, x in enumerate(labels) if x is False), -1)
        assert r["first_error"] == fe
        if fe >= 0:
            assert all(x is None for x in labels[fe + 1:])
        if r["label_status"] == UNREACHED:
            # no claim about the steps: step 1 wrong on a wrong answer (an error exists), nothing on a right one
            assert labels[1:] == [None] * (len(labels) - 1)
            assert labels[0] is (False if r["solution_correct"] is False else None)
            assert r["mc_correct"][0] == 0 and r["mc_total"][0] == K  # 0 of K at step 1
        if r["label_status"] == REACH_TRUSTED:
            assert r["solution_correct"] is True and labels == [True] * len(labels)
            assert r["rollouts"] == K  # the bare problem's draws only (one solution per problem here)


@pytest.mark.timeout(900)
def test_deterministic_under_another_sharding(gated):
    _rows, (a, b) = gated
    ra, rb = rows_by_key(read_corpus(a)), rows_by_key(read_corpus(b))
    assert ra.keys() == rb.keys()
    cols = ("labels", "first_error", "label_status", "mc_correct", "mc_total", "rollouts", "rollout_tokens",
            "first_error_confidence")
    for key in ra:
        for c in cols:
            assert ra[key][c] == pytest.approx(rb[key][c]) if c == "first_error_confidence" else ra[key][c] == rb[key][c]


@pytest.mark.timeout(900)
def test_stored_confidence_of_unreached_claims_against_the_exact_checker(gated):
    from pipeline.bundled.synthetic import check_steps

    rows, (out, _) = gated
    truth = {r["id"]: check_steps(r["problem"], r["steps"]).first_error for r in rows}
    got = [r for r in read_corpus(out).to_pylist() if r["label_status"] == UNREACHED]
    assert got
    hits = sum(truth[r["id"]] == r["first_error"] for r in got)
    conf = sum(r["first_error_confidence"] for r in got) / len(got)
    # the mean stated confidence of the claims lies within a 99% Wilson interval of how often they are right
    n, p, z = len(got), hits / len(got), 2.576
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert mid - half <= conf <= mid + half, (hits, n, conf)


@pytest.mark.timeout(900)
def test_train_drops_or_down_weights_unreached_rows(gated):
    from transformers import AutoTokenizer

    from pipeline.bundled import MODEL_DIR
    from pipeline.training.collate import DEFAULT_SEPARATOR, PrmFormat, ensure_separator
    from pipeline.training.options import UNREACHED_WEIGHT, TrainConfig
    from pipeline.training.targets import prepare

    _rows, (out, _) = gated
    # the label rule recomputes targets from the counts (hard: step 1 negative at 0 of K), so every unreached row
    # has some, whatever its stored labels
    unreached = [r for r in read_corpus(out).to_pylist() if r["label_status"] == UNREACHED]
    assert unreached
    tok = AutoTokenizer.from_pretrained(str(MODEL_DIR))
    sep_id, _ = ensure_separator(tok, DEFAULT_SEPARATOR)
    got = {}
    for mode in ("drop", "down-weight", "keep"):
        cfg = TrainConfig(corpus=out, output="unused", val_fraction=0.0, unreached=mode)
        prep = prepare(cfg, tok, PrmFormat(), sep_id)
        got[mode] = prep
    assert TrainConfig(corpus=out, output="unused").unreached == "drop"  # the default
    assert got["drop"].counts["skipped"].get("unreached") == len(unreached)
    assert len(got["keep"].train) == len(got["drop"].train) + len(unreached)
    ratios = []
    for kept, down in zip(got["keep"].train, got["down-weight"].train, strict=True):
        pairs = [(a, b) for a, b in zip(kept.weights, down.weights, strict=True) if a > 0]
        ratios.append(pairs[0][1] / pairs[0][0])
    assert sum(r == pytest.approx(UNREACHED_WEIGHT) for r in ratios) == len(unreached)
    assert sum(r == pytest.approx(1.0) for r in ratios) == len(ratios) - len(unreached)


@pytest.mark.timeout(900)
def test_stats_reports_unreached(gated):
    _rows, (out, _) = gated
    n = sum(r["label_status"] == UNREACHED for r in read_corpus(out).to_pylist())
    res = run_mcprm("stats", out, "--json")
    assert res.returncode == 0, res.stderr
    u = json.loads(res.stdout)["unreached"]
    assert u["gated"] == N and u["rows"] == n
    text = run_mcprm("stats", out, env={"COLUMNS": "250"}).stdout
    assert "unreached" in text and "no claim about their steps" in text


@pytest.mark.timeout(900)
def test_step1_probe_end_to_end_against_the_bare_problem_gate(gated, tmp_path):
    """--reach-probe step1 on the same rows, seed and K: no bare-problem draw (a wrong answer's row costs the bare
    gate's less its K where both took the same path), trusted rows stopped on their successes store first-wave,
    and the label invariants hold."""
    from pipeline.run import label

    rows, (bare_out, _) = gated
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = str(tmp_path / "out")
    label(make_cfg(str(inp), out, strategy="binary-search", reach_gate=True, reach_probe="step1", k=K,
                   shard_size=N, seed=20261201))
    t, was = rows_by_key(read_corpus(out)), rows_by_key(read_corpus(bare_out))
    m = json.load(open(f"{out}/manifest.json"))
    assert m["counts"]["rollouts"] == sum(r["rollouts"] for r in t.values())
    assert {r["label_status"] for r in t.values()} <= set(REACH_STATUSES) and len(t) == N
    same_path = 0
    for key, r in t.items():
        labels = r["labels"]
        fe = next((i for i, x in enumerate(labels) if x is False), -1)
        assert r["first_error"] == fe and (fe < 0 or all(x is None for x in labels[fe + 1:]))
        if r["label_status"] == REACH_TRUSTED:
            assert r["solution_correct"] is True and labels == [True] * len(labels)
            need = math.ceil(0.5 * K)
            assert r["mc_correct"][0] >= need and r["rollouts"] == r["mc_total"][0] <= K
            assert r["mc_design"] == "first-wave"
        b = was[key]
        if r["solution_correct"] is False and r["mc_total"] == b["mc_total"] and r["mc_correct"] == b["mc_correct"]:
            same_path += 1  # the same probes with the same seeds: the bare gate's cost less its K bare draws
            assert r["rollouts"] == b["rollouts"] - K and r["labels"] == b["labels"]
    assert same_path > 0
