"""Live progress (issue 14, point 5): the counts and ETA as a unit (no clock: times are given), and a real CLI
run on a pseudo-terminal with the bar on, which finishes and prints its summary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipeline.execution.progress import ProgressState

ROOT = Path(__file__).resolve().parents[3]


def test_counts_partial_then_final_never_twice():
    p = ProgressState(total=6, t0=100.0)
    assert p.eta(100.0) is None and p.done == 0
    p.solution_done(0, 4, 40)
    p.solution_done(0, 6, 60)
    p.solution_done(1, 2, 20)
    assert (p.done, p.rollouts, p.tokens) == (3, 12, 120)
    p.shard_done(0, 3, 15, 150)  # the shard's final counts replace its partial ones
    assert (p.done, p.rollouts, p.tokens) == (4, 17, 170)
    p.shard_done(0, 3, 15, 150)  # a shard reported twice (retried) is counted once
    assert p.done == 4
    assert p.rates(110.0) == (1.7, 17.0)
    assert p.eta(110.0) == 5.0  # 2 left at 10 s / 4 solutions
    p.shard_done(1, 3, 9, 90)
    assert p.done == 6 and p.eta(120.0) == 0.0
    assert "6/6 solutions" in p.line(120.0) and "ETA 0 s" in p.line(120.0)


def test_eta_converges_at_a_steady_rate():
    p = ProgressState(total=100, t0=0.0)
    etas = []
    for i in range(1, 100):
        p.solution_done(i // 10, 1, 10)
        etas.append(p.eta(float(i) + 5.0))  # 1 solution/s after a 5 s warm-up
    # the true remaining time at 1 solution/s is 100 - i; the error shrinks as the run goes on
    errors = [abs(e - (100 - i)) for i, e in enumerate(etas, start=1)]
    assert errors[-1] < errors[49] < errors[0]
    assert errors[-1] < 0.1


def test_cli_run_with_progress_on_a_terminal(tmp_path):
    import pty

    src = ROOT / "data" / "sample.jsonl"
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(src.read_text().splitlines(keepends=True)[:4]))
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), COLUMNS="160")
    p = subprocess.Popen([sys.executable, "-m", "cli.main", "label", "--input", str(inp), "--output",
                          str(tmp_path / "out"), "--k", "2", "--max-new-tokens", "16", "--shard-size", "2",
                          "--executor", "local", "--progress"],
                         cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            b = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not b:
            break
        chunks.append(b)
    rc = p.wait(600)
    os.close(master)
    text = b"".join(chunks).decode(errors="replace")
    assert rc == 0, text
    assert "labeling" in text and "4/4" in text and "tok/s" in text and "ETA" in text, text
    assert "version 1: labeled 4 solutions" in text  # the final summary
