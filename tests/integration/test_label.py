"""End to end with the real bundled model: schema, readers, determinism, resume, config changes, bad input."""

from __future__ import annotations

import json

import pytest

from pipeline.config import ConfigError
from pipeline.corpus import read_corpus, shard_uris
from pipeline.run import label
from pipeline.storage.schema import arrow_schema

from .conftest import N_ROWS, invoke_mcprm, make_cfg, rows_by_key


def test_schema_rows_and_readers(reference_run):
    out, res, rows = reference_run
    assert res.added == N_ROWS and len(rows) == N_ROWS
    table = read_corpus(out)
    assert table.schema.equals(arrow_schema(), check_metadata=False)
    m = json.load(open(f"{out}/manifest.json"))
    assert m["counts"]["solutions"] == N_ROWS
    # shard files are named by the run that wrote them (part-NNNNN.<owner>.parquet: fenced writes, issue 25)
    import re

    assert [re.sub(r"(\.[0-9a-f]+)+\.parquet$", ".parquet", s["path"]) for s in m["shards"]] == [  # owner, attempt
        f"data/v00001/part-{i:05d}.parquet" for i in range(3)]
    assert m["first_error_model"]["model"] == "changepoint-eb-3" and m["first_error_model"]["rows"] > 0
    assert m["versions"]["grader"] and m["identity_fields"]["k"] == 2
    assert m["counts"]["rollouts"] == sum(r["rollouts"] for r in rows.values()) > 0
    # every reused draw is in some step's mc_total and in the manifest's count; the bundled model often copies the
    # solution's next steps, so there are some
    assert m["counts"]["reused_rollouts"] == sum(sum(r["mc_total"]) - r["rollouts"] for r in rows.values()) > 0
    for r in rows.values():
        n = len(r["steps"])
        assert len(r["labels"]) == len(r["mc_value"]) == len(r["mc_total"]) == n
        assert r["completions"] == r["steps"] and r["prompt"] == r["problem"]
        # per-step: every prefix but the last gets K=2 continuations of its own, and maybe more from an earlier
        # prefix's continuations that wrote its steps verbatim (rollout reuse)
        assert all(t >= 2 for t in r["mc_total"][:-1]) and r["mc_total"][-1] == 0
        assert r["rollouts"] == 2 * (n - 1)
        fe = next((i for i, x in enumerate(r["labels"]) if x is False), -1)
        assert r["first_error"] == fe
    import polars as pl

    assert pl.read_parquet(shard_uris(out)).height == N_ROWS
    import datasets

    ds = datasets.load_dataset("parquet", data_files=shard_uris(out), split="train")
    assert len(ds) == N_ROWS and set(ds.column_names) >= {"prompt", "completions", "labels"}
    # the shard files themselves hold the version's confidence: a reader outside mcprm sees what mcprm's see
    by_key = {k: (r["first_error_confidence"], r["first_error_posterior"]) for k, r in rows.items()}
    outside = {k: (c, p) for k, c, p in zip(ds["key"], ds["first_error_confidence"], ds["first_error_posterior"])}
    assert outside.keys() == by_key.keys()
    assert sum(c is not None for c, _ in outside.values()) >= N_ROWS - 2  # rows with rollouts have one
    for k, (c, p) in outside.items():
        assert (c is None) == (by_key[k][0] is None)
        if c is not None:
            assert c == pytest.approx(by_key[k][0], abs=1e-6) and p == pytest.approx(by_key[k][1], abs=1e-6)


def test_same_seed_same_labels_different_seed_differs(small_input, reference_run, tmp_path):
    _, _, ref = reference_run
    label(make_cfg(small_input, str(tmp_path / "a"), shard_size=5))  # other sharding, same labels
    assert rows_by_key(read_corpus(str(tmp_path / "a"))) == ref
    label(make_cfg(small_input, str(tmp_path / "b"), seed=123))
    other = rows_by_key(read_corpus(str(tmp_path / "b")))
    assert other.keys() == ref.keys()
    assert any(other[k]["mc_correct"] != ref[k]["mc_correct"] for k in ref)


def test_rerun_is_noop_and_changed_config_is_refused(small_input, tmp_path):
    out = str(tmp_path / "out")
    label(make_cfg(small_input, out, limit=3))
    before = open(f"{out}/manifest.json").read()
    res = label(make_cfg(small_input, out, limit=3))
    assert res.added == 0 and open(f"{out}/manifest.json").read() == before
    with pytest.raises(ConfigError, match="different configuration"):
        label(make_cfg(small_input, out, limit=3, k=3))
    assert open(f"{out}/manifest.json").read() == before  # nothing touched
    res = label(make_cfg(small_input, out, limit=3, k=3, overwrite=True))
    assert res.version == 2 and res.added == 3 and res.reused == 0  # a new corpus version


def test_ray_executor_matches_in_process(small_input, reference_run, tmp_path):
    _, _, ref = reference_run
    out = str(tmp_path / "ray")
    res = label(make_cfg(small_input, out, executor="ray", num_workers=2))
    assert res.added == N_ROWS
    assert rows_by_key(read_corpus(out)) == ref
    th, counts = res.manifest["throughput"], res.manifest["counts"]
    # backend counters are cumulative per worker: summed over the 2 workers, not over the shards
    assert res.shards_run > th["workers"] == 2
    assert th["backend"]["samples"] == counts["rollouts"]
    assert th["backend"]["generated_tokens"] == counts["rollout_tokens"]
    assert 0 <= th["startup_seconds"] <= th["seconds"]  # by construction (no timing bound: loaded machines)
    assert th["labeling_seconds"] == pytest.approx(th["seconds"] - th["startup_seconds"], abs=0.01)
    assert th["generated_tokens_per_s"] == pytest.approx(counts["rollout_tokens"] / th["labeling_seconds"], rel=0.01)


def test_cli_default_options_and_bad_input(tmp_path, small_input):
    bad = tmp_path / "bad.jsonl"
    lines = open(small_input).read().splitlines()
    lines.insert(2, '{"problem": "Compute 1 + 1.", "steps": ["1 + 1 = 2"]}')  # no gold answer
    bad.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    r = invoke_mcprm("label", "--input", str(bad), "--output", str(out), "--k", "2", "--strategy", "per-step", "--executor", "local")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "bad.jsonl" in r.stderr and "line 3" in r.stderr and "answer" in r.stderr
    assert not (out / "manifest.json").exists() and not list(out.glob("data/*/*.parquet"))
    r = invoke_mcprm("label", "--input", str(bad), "--output", str(out), "--k", "2", "--strategy", "per-step", "--executor", "local",
                  "--skip-bad", "--limit", "3", "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    rej = [json.loads(x) for x in (out / "rejects" / "v00001.jsonl").read_text().splitlines()]
    assert len(rej) == 1 and "answer" in json.dumps(rej[0])
    r = invoke_mcprm("stats", str(out), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["solutions"] == 3
    r = invoke_mcprm("eval", str(out), "--reference", "synthetic", "--json")
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert {"f1", "acc_error", "acc_correct", "step_accuracy", "solutions", "rollout_tokens"} <= set(m)


def test_eval_reports_the_confidence_against_the_checker(reference_run):
    """``evaluate``'s ECE and AUROC of first_error_confidence are those of the rows against the bundled task's
    exact checker, computed here pair by pair."""
    from pipeline.bundled.synthetic import check_steps
    from pipeline.commands.evaluate import evaluate

    out, _res, rows = reference_run
    pairs = []
    for r in rows.values():
        if r["rollouts"] > 0 and r["first_error_confidence"] is not None:
            truth = check_steps(r["problem"], list(r["steps"])).first_error
            pairs.append((r["first_error_confidence"], r["first_error"] == truth))
    m = evaluate(out, "synthetic")
    assert m["confidence_rows"] == len(pairs) > 0
    pos = [c for c, ok in pairs if ok]
    neg = [c for c, ok in pairs if not ok]
    if pos and neg:
        want = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg) / (len(pos) * len(neg))
        assert m["confidence_auroc"] == pytest.approx(want)
    else:
        assert m["confidence_auroc"] is None
    assert 0 <= m["confidence_ece"] <= 1
    # a relabeling rule has other first errors than the stored confidence speaks of: no confidence numbers
    assert evaluate(out, "synthetic", label_rule="threshold")["confidence_rows"] == 0


def test_stats_says_how_to_read_the_confidence(reference_run):
    from typer.testing import CliRunner

    from cli.main import app
    from pipeline.storage.confidence import reads_as

    out, _res, _rows = reference_run
    res = CliRunner().invoke(app, ["stats", out, "--json"])
    assert res.exit_code == 0, res.output
    # a per-step corpus: measured close to calibrated, overconfident near 1
    assert json.loads(res.output)["uncertainty"]["confidence_reads_as"] == "ranking, close to a probability"
    res = CliRunner().invoke(app, ["stats", out], env={"COLUMNS": "250"})  # one table line per row
    assert "reads as" in res.output and "close to a probability, overconfident near 1" in res.output
    assert reads_as("binary-search") == reads_as("sequential") == "ranking"
