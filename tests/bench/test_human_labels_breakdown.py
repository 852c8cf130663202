"""The breakdown of label corpora against human first errors, on the real GPU corpora kept in the repository
(ProcessBench-MATH dev part, the real 1.5B model): its F1 is the one the GPU run measured with ``mcprm eval``,
and its split obeys what trusting a right answer means."""

from __future__ import annotations

import importlib.util
import json
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
S7 = ROOT / "bench" / "gpu_e2e" / "results" / "s7"


def _script():
    spec = importlib.util.spec_from_file_location("human_labels_breakdown", ROOT / "bench" / "human_labels_breakdown.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    d = tmp_path_factory.mktemp("s7")
    for name in ("h_ps", "h_df"):
        with tarfile.open(S7 / f"{name}_corpus.tgz") as t:
            t.extractall(d / name, filter="data")
    return d


def test_breakdown_matches_the_measured_f1_and_the_trust_rule(corpora, capsys):
    mod = _script()
    ref = mod.read_reference(str(corpora / "h_df" / "reference.jsonl"))
    ps = mod.read_labels(str(corpora / "h_ps" / "per-step-k8"))
    df = mod.read_labels(str(corpora / "h_df" / "defaults"))
    dead = mod.unreached(ps)
    b_ps, b_df = mod.breakdown(ps, ref, dead), mod.breakdown(df, ref, dead)
    measured = {json.loads(line)["config"]: json.loads(line)["f1"] for n in ("h_ps", "h_df")
                for line in (S7 / f"{n}.jsonl").read_text().splitlines() if line.strip()}
    assert b_ps["f1"] == pytest.approx(measured["per-step-k8"], abs=1e-9)
    assert b_df["f1"] == pytest.approx(measured["defaults"], abs=1e-9)
    for b in (b_ps, b_df):
        assert b["solutions"] == 402 and b["errors_wrong_answer"] + b["errors_right_answer"] == 117
        assert b["hit_wrong_answer"] + b["hit_right_answer"] == round(b["acc_error"] * 117)
    # a trusted right answer is never flagged: no hit and no false flag among right-answer solutions
    assert b_df["hit_right_answer"] == 0 and b_df["flags_on_correct"] == 0
    # per-step never trusts: it flags some correct solutions, most of them ones the completer cannot reach
    assert b_ps["flags_on_correct"] > 0 and b_ps["flags_on_correct_unreached"] <= b_ps["flags_on_correct"]
    assert 0 < len(dead) < 402 and all(ps[i]["first_step"][0] == 0 for i in dead)
    mod.main(["--reference", str(corpora / "h_df" / "reference.jsonl"), str(corpora / "h_ps" / "per-step-k8"),
              str(corpora / "h_df" / "defaults")])
    out = capsys.readouterr().out
    assert "| per-step-k8 | 0.425 [" in out and "| defaults | 0.329 [" in out
    # every stored corpus was labeled with seed 0: the split is drawn from the scored corpora's own draws
    assert out.count("(same draws)") == 2 and "0 of 8 (reach corpus)" in out
    # per-step's lead over the defaults: +14 exact first errors, not "21 of 37"
    assert (b_ps["hit_wrong_answer"] + b_ps["hit_right_answer"]) - (b_df["hit_wrong_answer"]
                                                                   + b_df["hit_right_answer"]) == 14
    # the F1 a labeler that trusts right answers can reach at best: all wrong-answer errors found, no false flag
    assert b_df["trust_ceiling_f1"] == pytest.approx(2 * (62 / 117) / (62 / 117 + 1))


def test_intervals_cover_the_population_f1_at_their_rate(monkeypatch):
    """The bootstrap intervals against the truth: solutions drawn from a known population, the F1 interval and the
    paired-difference interval cover the population's values in about 95% of repetitions."""
    import numpy as np

    mod = _script()
    monkeypatch.setattr(mod, "BOOT", 300)
    rng = np.random.default_rng(5)
    n, reps = 150, 60

    def draw(m):
        truth = np.where(rng.random(m) < 0.4, rng.integers(0, 5, m), -1)
        # a: right on 60% of errors and 80% of correct ones; b: 50% and 80%
        ua, ub = rng.random(m), rng.random(m)
        a = np.where(truth == -1, np.where(ua < 0.8, -1, 0), np.where(ua < 0.6, truth, -1))
        b = np.where(truth == -1, np.where(ub < 0.8, -1, 0), np.where(ub < 0.5, truth, -1))
        return truth.tolist(), a.tolist(), b.tolist()

    f1a, f1b = 2 * 0.6 * 0.8 / 1.4, 2 * 0.5 * 0.8 / 1.3  # the population's F1s
    cover_f1 = cover_diff = 0
    for _ in range(reps):
        t, a, b = draw(n)
        lo, hi = mod.f1_interval(a, t)
        cover_f1 += lo <= f1a <= hi
        _d, dlo, dhi = mod.paired_difference(a, b, t)
        cover_diff += dlo <= f1a - f1b <= dhi
    # 95% nominal; with 60 repetitions a rate under 0.85 would be a 3-sigma miss
    assert cover_f1 / reps >= 0.85 and cover_diff / reps >= 0.85


def test_replay_expected_draws_and_its_table(corpora, capsys):
    import itertools

    spec = importlib.util.spec_from_file_location("replay_reach_gate", ROOT / "bench" / "replay_reach_gate.py")
    rep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rep)
    for c in range(9):  # the expectation against every order of the draws (waves 2, 4, 2)
        orders = list(itertools.combinations(range(8), c)) if c else [()]
        brute = sum(8 if not pos else 2 if min(pos) < 2 else 6 if min(pos) < 6 else 8 for pos in orders) / len(orders)
        assert rep.expected_draws(c, 8) == pytest.approx(brute)
    rep.main([str(corpora / "h_ps" / "per-step-k8"), str(corpora / "h_df" / "reference.jsonl")])
    out = capsys.readouterr().out
    assert "choose half" in out and "read half" in out and "| gate (step1), trust from 0.500 |" in out
    assert "| gate (answer) + bare problem, trust from 0.500 |" in out
    assert "| gate (step1), step 1 settled, trust from 0.250 |" in out
    # waves 2, 4, 2 of K=8 with trust at 4 successes: all succeed -> settled at 6; none -> 8; need 1 and
    # all succeed -> 2; and never more than the full probe
    assert rep.expected_trust_draws(8, 8, 4) == 6 and rep.expected_trust_draws(0, 8, 4) == 8
    assert rep.expected_trust_draws(8, 8, 1) == 2
    assert all(rep.expected_trust_draws(c, 8, 4) <= 8 for c in range(9))


def test_replay_prices_a_draw_by_what_is_left_to_write():
    spec = importlib.util.spec_from_file_location("replay_reach_gate", ROOT / "bench" / "replay_reach_gate.py")
    rep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rep)
    row = {"steps": ["a" * 100, "b" * 300, "c" * 50, "d" * 50], "mc_total": [8, 8, 6, 0],
           "mc_reused": [0, 0, 2, 0], "rollouts": 20, "rollout_tokens": 5000}
    price, bare = rep.draw_weights(row)
    # per-step's own draws (total less reused) add up to the row's stored tokens
    assert sum((n - r) * p for n, r, p in zip(row["mc_total"], row["mc_reused"], price)) == pytest.approx(5000)
    # an earlier prefix leaves more to write: dearer; the bare problem dearest; the mean price would be 250
    assert bare > price[0] > price[1] > price[2] > price[3] > 0 and price[0] > 250 > price[2]
    # a row whose steps are not known falls back to the mean
    assert rep.draw_weights({**row, "steps": None}) == ([250.0] * 4, 250.0)


def test_a_reference_row_without_a_label_is_named(tmp_path):
    mod = _script()
    p = tmp_path / "ref.jsonl"
    p.write_text('{"id": "a", "label": 1}\n{"id": "b"}\n')
    with pytest.raises(SystemExit, match=r"ref.jsonl:2: a reference row needs 'id' and 'label'"):
        mod.read_reference(str(p))


def test_dead_prefixes_of_right_answers_are_mostly_the_completers_misses(corpora):
    """``mcprm stats``' count of right-answer steps with 0 of K, read against the human labels: most of those
    prefixes are correct (they precede the human first error), so the count measures the completer's misses."""
    from pipeline.corpus import corpus_stats, read_corpus

    mod = _script()
    ref = mod.read_reference(str(corpora / "h_df" / "reference.jsonl"))
    url = str(corpora / "h_ps" / "per-step-k8")
    d = corpus_stats(url)["dead_right_prefixes"]
    dead = correct = 0
    for r in read_corpus(url, columns=["id", "solution_correct", "mc_correct", "mc_total"]).to_pylist():
        if not r["solution_correct"]:
            continue
        h = ref[r["id"]]
        for j, (c, n) in enumerate(zip(r["mc_correct"], r["mc_total"])):
            if n > 0 and c == 0:
                dead += 1
                correct += h == -1 or j < h
    assert d["dead"] == dead == 409 and d["probed"] == 1794 and d["solutions"] == 135
    assert correct / dead > 0.8  # 335 of 409 precede the human first error
    # trusted right answers are never probed: the defaults' corpus has no such steps to count
    assert corpus_stats(str(corpora / "h_df" / "defaults"))["dead_right_prefixes"] is None


def test_an_unfinished_run_is_read_from_its_finished_shards_and_paired_on_them(tmp_path, capsys):
    """A run cut before its version (the reach-gated run of results/s9, 4 of 7 shards finished): its rows are
    the finished shards' own, and the paired difference is taken on the solutions both corpora hold."""
    import pyarrow.parquet as pq

    s9 = ROOT / "bench" / "gpu_e2e" / "results" / "s9"
    for name in ("h50a_corpus", "h50b_reach_gate_k20_partial"):
        with tarfile.open(s9 / f"{name}.tgz") as t:
            t.extractall(tmp_path, filter="data")
    mod = _script()
    rg = mod.read_labels(str(tmp_path / "reach-gate"))
    parts = [p for p in (tmp_path / "reach-gate").glob("data/v*/part-*.parquet")]
    assert len(parts) == 4 and len(rg) == sum(pq.read_metadata(p).num_rows for p in parts) == 256
    # a shard whose summary is missing was not finished: left out
    parts[0].with_suffix(".sum.json").unlink()
    assert len(mod.read_labels(str(tmp_path / "reach-gate"))) == 256 - pq.read_metadata(parts[0]).num_rows
    with tarfile.open(s9 / "h50b_reach_gate_k20_partial.tgz") as t:
        t.extractall(tmp_path, filter="data")
    ps = mod.read_labels(str(tmp_path / "per-step-k8"))
    ids = sorted(rg)
    assert set(ids) < set(ps)
    ref = {i: ps[i]["first_error"] for i in ps}  # per-step as the reference: its own F1 on them is 1
    d = mod.intervals([ps, rg], ref)
    assert d[0]["shared"] == 256 and d[1]["diff"][0] < 0
    # the cost on the same 256 solutions: each row's own rollout tokens, summed (the shards' summaries agree)
    sums = [json.loads(p.with_suffix(".sum.json").read_text())["counts"]["rollout_tokens"]
            for p in (tmp_path / "reach-gate").glob("data/v*/part-*.parquet")]
    assert d[1]["tokens_shared"] == sum(sums) and d[0]["tokens_shared"] == sum(ps[i]["rollout_tokens"] for i in ids)
    assert d[0]["tokens_vs_first"] == 1.0 and d[1]["tokens_vs_first"] > 1.5  # the gate at K=20 drew more
    with pytest.raises(SystemExit, match="no committed version and no finished shard"):
        mod.read_labels(str(tmp_path))
