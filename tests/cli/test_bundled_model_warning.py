"""Rows unlike the bundled task, labeled with the bundled model: one warning line that says its labels mean
nothing and to use --model, repeated by stats, report, export and train; a row too long for its context says
to use --model (not only to lower --max-new-tokens)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from cli.main import app

ROWS = [
    {"id": "g1", "problem": "Tom has 3 apples and buys 4 more. How many apples?", "answer": "7",
     "steps": ["3 + 4 = 7", "The answer is 7"]},
    {"id": "g2", "problem": "Ann reads 5 pages a day for 2 days. How many pages?", "answer": "10",
     "steps": ["5 * 2 = 10", "The answer is 10"]},
]
LONG = {"id": "g3", "problem": "A farmer " + "has many fields and " * 30 + "sells 2. How many?", "answer": "2",
        "steps": ["2", "The answer is 2"]}


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_rows_unlike_the_bundled_task_are_said_to_mean_nothing_everywhere(tmp_path):
    inp = tmp_path / "mine.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = tmp_path / "out"
    r = run("label", "--input", inp, "--output", out, "--k", "2", "--max-new-tokens", "24", "--executor", "local",
            "-q")
    assert r.exit_code == 0, r.output
    want = "2 of 2 problems are unlike the bundled model's synthetic task"
    lines = [x for x in r.output.splitlines() if want in x]
    assert len(lines) == 1 and lines[0].startswith("warning: ") and "use --model NAME" in lines[0], r.output
    assert "docs/inputs.md" in lines[0]
    manifest = json.loads((out / "manifest.json").read_text())
    assert [w["code"] for w in manifest["warnings"]].count("bundled-model") == 1
    for args in (("stats", out), ("stats", out, "--json"),
                 ("export", out, "--format", "trl", "--output", tmp_path / "trl"),
                 ("report", out, "--output", tmp_path / "rep"),
                 ("train", out, "--output", tmp_path / "prm", "--epochs", "1", "--no-progress")):
        r = run(*args)
        assert r.exit_code == 0, (args, r.output)
        assert f"warning: {want}" in r.stderr, (args, r.stderr)
    import html

    assert html.escape(want) in (tmp_path / "rep" / "report.html").read_text()


def test_a_row_too_long_for_the_bundled_model_says_use_model(tmp_path):
    inp = tmp_path / "long.jsonl"
    inp.write_text(json.dumps(LONG) + "\n")
    r = run("label", "--input", inp, "--output", tmp_path / "out", "--k", "2", "--executor", "local", "-q")
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    assert "prompt too long for the model" in text and "use --model NAME" in text, text
    assert "knows only its synthetic task" in text
