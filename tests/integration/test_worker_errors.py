"""An error raised inside a worker reaches the user as one message naming the row (issue 14, point 4): real
CLI runs in a subprocess where one specific row makes the worker fail (``MCPRM_FAULT_RAISE``)."""

from __future__ import annotations

import json

import pytest

from pipeline.execution.shard_worker import WorkerError, source_where
from pipeline.solution import Solution

from .conftest import run_mcprm


def _input(small_input, tmp_path):
    rows = [json.loads(x) for x in open(small_input).read().splitlines()][:5]
    p = tmp_path / "in.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(p), rows[3]["id"]  # the row on line 4 fails


def _label(inp, out, *extra, env=None):
    return run_mcprm("label", "--input", inp, "--output", out, "--k", "2", "--strategy", "per-step", "--max-new-tokens", "16",
                     "--shard-size", "2", *extra, env=env)


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_worker_error_is_one_message_naming_the_row(small_input, tmp_path, executor):
    inp, bad_id = _input(small_input, tmp_path)
    extra = ("--executor", executor) + (("--num-workers", "1") if executor == "ray" else ())
    env = {"MCPRM_FAULT_RAISE": f"label-solution:{bad_id}", "MCPRM_DEBUG": ""}
    r = _label(inp, str(tmp_path / "out"), *extra, env=env)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, r.stderr
    msg = errors[0]
    assert f"{inp} line 4" in msg and bad_id in msg, msg
    assert "ValueError: injected fault" in msg and "MCPRM_DEBUG=1" in msg, msg
    assert r.stderr.count("injected fault") == 1, r.stderr  # said once, not twice
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_worker_error_traceback_with_debug(small_input, tmp_path):
    inp, bad_id = _input(small_input, tmp_path)
    env = {"MCPRM_FAULT_RAISE": f"label-solution:{bad_id}", "MCPRM_DEBUG": "1"}
    r = _label(inp, str(tmp_path / "out"), "--executor", "local", env=env)
    assert r.returncode != 0
    assert "Traceback" in r.stderr and "fault_raise" in r.stderr, r.stderr
    assert f"{inp} line 4" in r.stderr


def test_error_not_tied_to_one_row_names_the_shard_and_its_rows():
    sols = [Solution(f"s{i}", "p", "1", ("a",), source=f"in.jsonl:{i}") for i in (6, 7, 8)]
    try:
        raise RuntimeError("CUDA error: out of memory\nmore detail")
    except RuntimeError as e:
        w = WorkerError.from_exception(e, 2, sols)
    assert str(w) == ("a worker failed while labeling shard 2 (3 solutions, in.jsonl line 7 to in.jsonl line 9): "
                      "RuntimeError: CUDA error: out of memory")
    assert "Traceback" in w.detail
    import pickle

    w2 = pickle.loads(pickle.dumps(w))  # crosses process boundaries (Ray) intact
    assert str(w2) == str(w) and w2.detail == w.detail
    assert source_where("d/x.parquet:0") == "d/x.parquet row 0"
    assert source_where("s3://b/in.jsonl:16") == "s3://b/in.jsonl line 17"


def test_skip_bad_quarantines_a_row_a_worker_fails_on(small_input, tmp_path):
    """With --skip-bad, a row the worker fails on goes to rejects/ with its reason, like a row validation
    rejects; the rest is labeled and committed, and a rerun once the row is fixed labels it."""
    from pipeline.corpus import read_corpus

    inp, bad_id = _input(small_input, tmp_path)
    out = str(tmp_path / "out")
    env = {"MCPRM_FAULT_RAISE": f"label-solution:{bad_id}", "MCPRM_DEBUG": ""}
    r = _label(inp, out, "--executor", "local", "--skip-bad", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    rejects = [json.loads(x) for x in open(f"{out}/rejects/v00001.jsonl").read().splitlines()]
    assert len(rejects) == 1, rejects
    rej = rejects[0]
    assert rej["id"] == bad_id and rej["where"] == f"{inp} line 4" and rej["file"] == inp and rej["row"] == 3
    assert "ValueError: injected fault" in rej["reason"] and rej["stage"] == "labeling"
    m = json.load(open(f"{out}/manifest.json"))
    assert m["counts"]["rejected"] == 1 and m["counts"]["solutions"] == 4 and m["counts"]["added"] == 4
    assert "version 1: labeled 4 solutions (0 reused, 1 rejected" in r.stdout, r.stdout  # the quarantined row is no label
    assert bad_id not in read_corpus(out, verify=True).column("id").to_pylist()
    r = _label(inp, out, "--executor", "local", "--skip-bad")  # the cause is gone: the row is labeled now
    assert r.returncode == 0, r.stdout + r.stderr
    m = json.load(open(f"{out}/manifest.json"))
    assert m["version"] == 2 and m["counts"]["added"] == 1 and m["counts"]["solutions"] == 5
