from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _write(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_single_pair_prints_verdict():
    res = runner.invoke(
        app, ["grade", "--gold", r"\frac{1}{2}", "--response", r"so the answer is \boxed{0.5}"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == {
        "correct": True, "reason": "numeric: exact", "extracted": "0.5", "kind": "verdict"
    }


def test_single_pair_exact_grader():
    res = runner.invoke(
        app, ["grade", "--gold", r"\frac{1}{2}", "--response", r"\boxed{0.5}", "--grader", "exact"]
    )
    assert res.exit_code == 0 and json.loads(res.stdout)["correct"] is False


def test_file_keeps_rows_and_order(tmp_path):
    rows = [
        {"id": 1, "gold": "112", "response": "The answer is \\boxed{112}.", "extra": [1, 2]},
        {"id": 2, "gold": r"\sqrt{8}", "response": r"\boxed{2\sqrt{3}}"},
        {"id": 3, "gold": 7, "response": "no answer here"},
        {"id": 4, "gold": r"(1,2]", "response": r"The answer is $1 < x \le 2$."},
    ]
    inp, out = _write(tmp_path / "cases.jsonl", rows), tmp_path / "verdicts.jsonl"
    res = runner.invoke(app, ["grade", "--input", str(inp), "--output", str(out), "--workers", "1"])
    assert res.exit_code == 0, res.output
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["id"] for g in got] == [1, 2, 3, 4]
    assert [g["correct"] for g in got] == [True, False, False, True]  # no answer: a failed response
    assert got[0]["extra"] == [1, 2] and got[0]["extracted"] == "112"
    assert got[2]["reason"] == "no answer found" and got[2]["extracted"] is None
    assert [p.name for p in tmp_path.iterdir()] != [] and not [p for p in tmp_path.iterdir() if ".tmp" in p.name]


@pytest.mark.parametrize(
    "lines,message",
    [
        (['{"gold": "1", "response": "1"}', "{not json"], "line 2: invalid JSON"),
        (['{"gold": "1"}'], "line 1: missing field 'response'"),
        (
            ['{"gold": "1", "response": "1"}', "", '{"gold": null, "response": "1"}'],
            "line 3: field 'gold' must be a string",
        ),
        (["[1, 2]"], "line 1: expected a JSON object"),
    ],
)
def test_malformed_input_fails_cleanly(tmp_path, lines, message):
    inp, out = _write(tmp_path / "cases.jsonl", lines), tmp_path / "verdicts.jsonl"
    out.write_text("previous\n")
    res = runner.invoke(app, ["grade", "--input", str(inp), "--output", str(out)])
    assert res.exit_code == 1
    assert message in res.stderr and "Traceback" not in res.output
    assert out.read_text() == "previous\n"  # untouched, no half-written file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cases.jsonl", "verdicts.jsonl"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--gold", "1"], "--gold and --response go together"),
        ([], "give either --gold and --response, or --input"),
        (["--gold", "1", "--response", "1", "--grader", "nope"], "no grader named 'nope'"),
        (["--gold", "1", "--response", "1", "--timeout", "0"], "--timeout must be > 0"),
        (["--input", "/nonexistent/cases.jsonl"], "cannot read /nonexistent/cases.jsonl"),
    ],
)
def test_usage_errors(args, message):
    res = runner.invoke(app, ["grade", *args])
    assert res.exit_code == 1 and message in res.stderr


def _group_alive(pgid: int) -> bool:
    """Whether any process of the process group ``pgid`` (a session this test started) is still alive."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a member exists but is not ours to signal
        return True
    return True


def _ten_thousand_cases(path: Path) -> list:
    latex = (
        [(rf"\sqrt{{{2 * k * k}}}", rf"{k}\sqrt{{2}}", True) for k in range(2, 30)]
        + [(rf"\frac{{x^2-{k * k}}}{{x-{k}}}", f"x+{k}", True) for k in range(1, 15)]
        + [(rf"({k}, {k + 1}]", rf"({k}, {k + 1})", False) for k in range(15)]
    )
    marker = path.parent / "pwned"
    hostile = [
        f"__import__('os').system('touch {marker}')", f"\\boxed{{exec(\"open('{marker}','w')\")}}",
        r"\boxed{9^{9^{9}}}", r"\boxed{\prod_{n=1}^{9999} n^{n}}", "\\boxed{" * 2000, "(" * 5000,
        r"\boxed{3^{³}}", "1," * 20_000, "\ud800 the answer is \ud800", r"\boxed{(10^{100})! + 1}",
    ]  # fmt: skip
    rows, expected = [], []
    for i in range(10_000):
        if i % 50 == 25:  # 200 adversarial rows: any verdict but True, nothing executed
            rows.append({"id": i, "gold": "5", "response": hostile[(i // 50) % len(hostile)]})
            expected.append("not True")
            continue
        if i % 10 == 0:
            gold, ans, ok = latex[(i // 10) % len(latex)]
            response = f"Step {i}.\nThe answer is $\\boxed{{{ans}}}$."
        else:
            gold, off = str(i * 7), (i % 3 == 0)
            ok = not off
            value = i * 7 + off
            response = [
                f"{value // 2} * 2 = {value}\nThe answer is \\boxed{{{value}}}.",
                f"So {value}.\n#### {value:,}",
                f"we get {value}",
            ][i % 3 if not off else 0]
        rows.append({"id": i, "gold": gold, "response": response})
        expected.append(ok)
    _write(path, rows)
    return expected


@pytest.mark.slow
def test_ten_thousand_pairs_subprocess_no_hang_no_leak(tmp_path):
    expected = _ten_thousand_cases(tmp_path / "cases.jsonl")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "grade", "--input", "cases.jsonl", "--output", "verdicts.jsonl"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the command and every process it starts are in a group of their own
    )
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:  # a hang: end what this test started (its own session), nothing else
            os.killpg(proc.pid, 9)
    assert proc.returncode == 0, stderr
    got = [json.loads(line) for line in (tmp_path / "verdicts.jsonl").read_text().splitlines()]
    assert [g["id"] for g in got] == list(range(10_000))
    assert [g["correct"] if e != "not True" else g["correct"] is not True for g, e in zip(got, expected)] == [
        e if e != "not True" else True for e in expected
    ]
    assert all(g["reason"] for g in got)
    assert not (tmp_path / "pwned").exists()
    assert "graded 10000 rows" in stderr
    for _ in range(50):  # workers that are exiting get a moment (a bounded wait, not a speed assertion)
        if not _group_alive(proc.pid):
            break
        time.sleep(0.1)
    assert not _group_alive(proc.pid), "grader worker processes outlived the command"


def test_problem_field_decides_the_order_policy(tmp_path):
    """The same tuple-vs-set pair: equal by default, different where the problem asks for an ordered pair."""
    pair = {"gold": "(3, 5)", "response": r"The solutions are $\boxed{\{5, 3\}}$."}
    rows = [
        pair,
        {**pair, "problem": "Find all real numbers $x$ with $x^2 - 8x + 15 = 0$."},
        {**pair, "problem": "Find the ordered pair $(a, b)$ with $a + b = 8$ and $ab = 15$, $a < b$."},
        {**pair, "problem": None},
    ]
    inp, out = _write(tmp_path / "cases.jsonl", rows), tmp_path / "verdicts.jsonl"
    res = runner.invoke(app, ["grade", "--input", str(inp), "--output", str(out), "--workers", "1"])
    assert res.exit_code == 0, res.output
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["correct"] for g in got] == [True, True, False, True]
    assert {g["kind"] for g in got} == {"verdict"}
    res = runner.invoke(
        app, ["grade", "--input", str(inp), "--output", str(out), "--workers", "1", "--tuple-vs-set", "differ"]
    )
    assert [json.loads(line)["correct"] for line in out.read_text().splitlines()] == [False] * 4


def test_problem_field_must_be_text(tmp_path):
    inp = _write(tmp_path / "cases.jsonl", [{"gold": "1", "response": "1", "problem": 7}])
    res = runner.invoke(app, ["grade", "--input", str(inp)])
    assert res.exit_code == 1 and "line 1: field 'problem' must be a string or null, got int" in res.stderr


def test_no_process_of_the_grader_outlives_the_command(tmp_path):
    """When ``mcprm grade`` exits, nothing it started is left: no worker, no multiprocessing helper (the
    resource tracker of a spawn context used to linger for seconds). Only this test's own session is looked at."""
    rows = [{"gold": rf"\sqrt{{{2 * k * k}}}", "response": rf"\boxed{{{k}\sqrt{{2}}}}"} for k in range(2, 12)]
    _write(tmp_path / "cases.jsonl", rows)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "grade", "--input", "cases.jsonl", "--output", "v.jsonl", "--workers", "2"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the command and every process it starts are in a group of their own
    )
    try:
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    assert proc.returncode == 0, stderr
    assert all(json.loads(line)["correct"] is True for line in (tmp_path / "v.jsonl").read_text().splitlines())
    assert not _group_alive(proc.pid), "a process of the grader outlived the command"
