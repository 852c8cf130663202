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
    p.solution_done(0, 4, 40, now=101.0)
    p.solution_done(0, 6, 60, now=102.0)
    p.solution_done(1, 2, 20, now=103.0)
    assert (p.done, p.rollouts, p.tokens) == (3, 12, 120)
    p.shard_done(0, 3, 15, 150, now=104.0)  # the shard's final counts replace its partial ones
    assert (p.done, p.rollouts, p.tokens) == (4, 17, 170)
    p.shard_done(0, 3, 15, 150, now=105.0)  # a shard reported twice (retried) is counted once
    assert p.done == 4
    assert p.rates(110.0) == (1.7, 17.0)
    assert p.eta(110.0) is not None and p.eta(110.0) > 0
    p.shard_done(1, 3, 9, 90, now=120.0)
    assert p.done == 6 and p.eta(120.0) == 0.0
    assert "6/6 solutions" in p.line(120.0) and "ETA 0 s" in p.line(120.0)


def _simulate(events, total, t_start):
    """ETAs shown after each event (time, solutions finished then), next to the true time left."""
    p = ProgressState(total=total, t0=t_start)
    t_end = events[-1][0]
    out = []
    for i, (t, n) in enumerate(events):
        p.shard_done(i, n, 0, 0, now=t)  # one "shard" per event: its solutions at once
        eta = p.eta(t)
        if p.done < total:
            out.append((t, eta, t_end - t))
    return out


def test_eta_is_close_to_the_truth_and_never_doubles_after_a_fast_start():
    """A run as it looks to the bar: a first burst of 40 solutions labeled without rollouts (trust-correct) 2 s
    after labeling starts, then bursts of 8 solutions every 8 s (1 solution/s: the scheduler's rounds finish
    solutions together), with some jitter. The mean rate since the start (the old ETA) first says 16 s for a
    run of 5 minutes, then doubles; the smoothed rate is within 30% of the true time left once it shows an
    ETA, and never jumps by half between two updates."""
    import random

    rng = random.Random(1)
    total, t = 40 + 8 * 40, 2.0
    events = [(t, 40)]
    for _ in range(40):
        t += 8.0 + rng.uniform(-2.0, 2.0)
        events.append((t, 8))
    shown = _simulate(events, total, t_start=0.0)
    etas = [(t, e, truth) for t, e, truth in shown if e is not None]
    assert len(etas) >= len(shown) - 3, "an ETA should be shown after a few bursts"
    for t, e, truth in etas:
        assert abs(e - truth) <= 0.3 * truth + 16, (t, e, truth)  # 16 s: two bursts of granularity
    for (_, a, _), (_, b, _) in zip(etas, etas[1:]):
        assert b <= 1.5 * a + 8, (a, b)

    # the old estimate (remaining / mean rate since labeling started) on the same run doubles
    done, old = 0, []
    for t, n in events[:-1]:
        done += n
        old.append((total - done) * t / done)
    assert old[0] < 0.1 * (events[-1][0] - events[0][0]) and old[1] > 2 * old[0], old[:3]


def test_eta_converges_at_a_steady_rate():
    p = ProgressState(total=100, t0=0.0)
    errors = []
    for i in range(1, 100):
        now = float(i) + 5.0  # 1 solution/s after a 5 s warm-up
        p.solution_done(i // 10, 1, 10, now=now)
        eta = p.eta(now)
        if eta is not None:
            errors.append(abs(eta - (100 - i)))
    assert len(errors) >= 95
    assert errors[-1] < 0.5 and max(errors) < 5.0


def test_progress_phases_and_one_final_line_when_piped(capsys):
    """Not a terminal: nothing about 0 rollouts / 0 tok/s before there is something to count; a plain line every
    every_s seconds with "ETA estimating" until there is a rate; the final line printed once, at close()."""
    from pipeline.execution.progress import LiveProgress

    clock = [0.0]
    lp = LiveProgress(4, enabled=True, every_s=10.0, clock=lambda: clock[0])
    assert lp.bar is None  # pytest's stderr is not a terminal
    assert lp.state.line(clock[0], lp.loading).endswith("loading the model")
    clock[0] = 15.0
    lp.start()
    assert "starting" in lp.state.info(clock[0])
    clock[0] = 26.0
    lp.solution(0, 5, 50)  # the first line: 11 s after the start
    clock[0] = 27.0
    lp.solution(0, 5, 50)
    clock[0] = 37.0
    lp.solution(1, 5, 50)
    clock[0] = 38.0
    lp.solution(1, 5, 50)  # all four done: the final line waits for the shards' final counts
    lp.shard({"shard": 0, "rows": 2, "rollouts": 10, "rollout_tokens": 100})
    lp.shard({"shard": 1, "rows": 2, "rollouts": 12, "rollout_tokens": 120})
    lp.close()
    lp.close()  # closing twice does not print twice
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("[mcprm]")]
    assert lines[0] == "[mcprm] 1/4 solutions, 5 rollouts, 5 tok/s, ETA estimating", lines
    assert [x for x in lines if "4/4" in x] == ["[mcprm] 4/4 solutions, 22 rollouts, 10 tok/s, ETA 0 s"], lines
    assert not any("0 rollouts, 0 tok/s" in x for x in lines)
    free = ProgressState(total=3, t0=0.0)
    free.solution_done(0, 0, 0, now=1.0)  # a solution labeled without rollouts (trusted as correct)
    assert free.line(2.0) == "1/3 solutions, no rollouts needed yet, ETA estimating"


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
