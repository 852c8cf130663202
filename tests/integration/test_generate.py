"""`mcprm generate` with the real bundled model: solutions in the format `label` reads, bad problems named."""

from __future__ import annotations

import json

from pipeline.bundled import PROBLEMS_PATH

from .conftest import invoke_mcprm, run_mcprm


def test_generate_then_label(tmp_path):
    probs = tmp_path / "problems.jsonl"
    probs.write_text("".join(line + "\n" for line in PROBLEMS_PATH.read_text().splitlines()[:3]))
    sols = tmp_path / "solutions.jsonl"
    r = run_mcprm("generate", "--input", str(probs), "--output", str(sols), "--n", "2", "--max-new-tokens", "160")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [json.loads(x) for x in sols.read_text().splitlines()]
    assert len(rows) == 6 and len({r["id"] for r in rows}) == 6
    assert all(r["steps"] and all(isinstance(s, str) and s for s in r["steps"]) for r in rows)
    assert sum("\\boxed{" in r["steps"][-1] for r in rows) >= 4  # the model ends solutions with its answer
    r = run_mcprm("label", "--input", str(sols), "--output", str(tmp_path / "out"), "--k", "2", "--strategy", "per-step",
                  "--executor", "local", "-q")
    assert r.returncode == 0, r.stderr
    distinct = len({(x["problem"], tuple(x["steps"])) for x in rows})
    assert f"labeled {distinct} solutions" in r.stdout  # identical samples are labeled once
    m = json.load(open(tmp_path / "out" / "manifest.json"))
    assert m["counts"]["duplicates_in_input"] == 6 - distinct


def test_generate_bad_problem_rows(tmp_path):
    probs = tmp_path / "problems.jsonl"
    probs.write_text('{"problem": "Compute 1 + 1.", "answer": "2"}\n{"problem": "Compute 2 + 2."}\n{"problem": \n')
    out = tmp_path / "s.jsonl"
    r = invoke_mcprm("generate", "--input", str(probs), "--output", str(out))  # refused: a message, an exit code
    assert r.returncode == 1
    assert "line 2" in r.stderr and "answer" in r.stderr and "line 3" in r.stderr
    assert not out.exists()
