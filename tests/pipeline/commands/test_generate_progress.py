"""`mcprm generate` tells how far it is: a line on stderr after each batch of problems (300 problems at --n 8 were
silent for minutes), none with --no-progress."""

from __future__ import annotations

from pipeline.bundled import PROBLEMS_PATH
from pipeline.commands.generate import generate
from pipeline.config import LabelConfig


def test_generate_reports_each_batch_of_problems(tmp_path):
    probs = tmp_path / "problems.jsonl"
    probs.write_text("".join(line + "\n" for line in PROBLEMS_PATH.read_text().splitlines()[:5]))
    seen = []
    cfg = LabelConfig(input=[str(probs)], output=str(tmp_path / "s.jsonl"), max_new_tokens=16)
    res = generate(cfg, n=2, batch_problems=2, on_batch=lambda *a: seen.append(a))
    # a first call once the model is loaded (0 done), then one after each batch of problems
    assert [(done, total) for done, total, *_ in seen] == [(0, 5), (2, 5), (4, 5), (5, 5)]
    assert seen[-1][2] == res.solutions and seen[-1][3] == res.generated_tokens
    assert all(a[2] <= b[2] and a[4] <= b[4] for a, b in zip(seen, seen[1:]))


def test_hf_default_batch_is_one_micro_batch(tmp_path):
    """By default a call holds the problems of one of the hf backend's micro-batches (64 rows: 8 problems at
    --n 8), so the first progress line comes after 8 problems, not 64."""
    probs = tmp_path / "problems.jsonl"
    probs.write_text("".join(line + "\n" for line in PROBLEMS_PATH.read_text().splitlines()[:40]))
    seen = []
    cfg = LabelConfig(input=[str(probs)], output=str(tmp_path / "s.jsonl"), max_new_tokens=4)
    generate(cfg, n=8, on_batch=lambda *a: seen.append(a))
    assert [done for done, *_ in seen] == [0, 8, 16, 24, 32, 40]


def test_progress_line_says_problems_solutions_and_time_left(capsys):
    from cli.generate import progress_line

    progress_line(0, 300, 0, 0, 3.0)
    progress_line(64, 300, 512, 40_000, 40.0)
    progress_line(300, 300, 2_400, 190_000, 190.0)
    err = capsys.readouterr().err.splitlines()
    assert err.pop(0) == "[mcprm] generate: model loaded in 3 s; sampling 300 problems"
    # the time left at the batches' pace after the 3 s model load: 37 s for 64 problems, 236 to go
    assert err[0] == "[mcprm] generate: 64/300 problems, 512 solutions, 40,000 tokens in 40 s, about 2 min 16 s left"
    assert err[1] == "[mcprm] generate: 300/300 problems, 2,400 solutions, 190,000 tokens in 190 s"


def test_cli_progress_line_and_no_progress(tmp_path):
    from typer.testing import CliRunner

    from cli.main import app

    probs = tmp_path / "problems.jsonl"
    probs.write_text("".join(line + "\n" for line in PROBLEMS_PATH.read_text().splitlines()[:2]))
    base = ["generate", "--input", str(probs), "--n", "2", "--max-new-tokens", "8"]
    r = CliRunner().invoke(app, [*base, "--output", str(tmp_path / "a.jsonl")])
    assert r.exit_code == 0, r.output
    assert "[mcprm] generate: 2/2 problems, " in r.output, r.output
    r = CliRunner().invoke(app, [*base, "--output", str(tmp_path / "b.jsonl"), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "[mcprm] generate:" not in r.output, r.output
