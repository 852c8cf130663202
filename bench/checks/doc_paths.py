"""The docs' two CPU walk-throughs at the size they are written for, timed, with thresholds.

* the quick path of docs/training.md: ``mcprm label`` (the whole bundled sample, the defaults), ``mcprm train``,
  ``mcprm score``, ``mcprm eval``;
* the worked refresh example of docs/refresh.md: two refreshes over 100, then 200 solutions (``--k 4``), each
  ``# comment`` that reads like output checked against what the command printed.

Each command runs as a user types it (``mcprm`` on the PATH is this checkout's CLI), in a fresh folder where
``data/`` is this checkout's. The test suite runs the same blocks on inputs a tenth as large
(tests/integration/test_doc_commands.py, through :func:`run_refresh_example` and :func:`run_training_quick_path`
here); this check is where the full size runs, and where its time is measured: a table of seconds per command,
exit status 1 when a command fails, a comment is not what the command printed, or a command took longer than its
threshold (defaults sized for a 2-core machine with other work running: the whole-sample label took 20 min 43 s
there).

    python bench/checks/doc_paths.py                      # both, full size
    python bench/checks/doc_paths.py --only refresh --max-label-s 900
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# seconds, per command of the quick path / of the refresh example (the slowest of its kind)
DEFAULT_MAX_S = {"label": 1800.0, "train": 300.0, "score": 300.0, "eval": 120.0, "other": 120.0}


def block(doc: str, first: str) -> list[tuple[str, str]]:
    """(command, comment) of each line of the first ```bash block of docs/``doc`` whose first line starts with
    ``first``."""
    for m in re.finditer(r"```bash\n(.*?)```", (ROOT / "docs" / doc).read_text(), re.S):
        lines = [line for line in m.group(1).splitlines() if line.strip()]
        if lines and lines[0].startswith(first):
            return [(line.split("  #", 1)[0].strip(), line.split("  #", 1)[1].strip() if "  #" in line else "")
                    for line in lines]
    raise AssertionError(f"docs/{doc} has no bash block starting with {first!r}")


def shell_env(tmp: Path, label_limit: int | None = None, **extra: str) -> dict:
    """An environment in which ``mcprm`` on the PATH is this checkout's CLI (a shim in ``tmp/bin``).
    ``label_limit``: every ``mcprm label`` of the shell labels at most that many solutions (``--limit``, added
    after the command's own options): the whole command as written, on a smaller part of its input."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    limit = ""
    if label_limit is not None:
        limit = f'if [ "$1" = label ]; then exec "{sys.executable}" -m cli.main "$@" --limit {int(label_limit)}; fi\n'
    (bin_dir / "mcprm").write_text(f'#!/bin/sh\n{limit}exec "{sys.executable}" -m cli.main "$@"\n')
    (bin_dir / "mcprm").chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra)


Shell = Callable[[str], str]


def make_shell(work: Path, env: dict, timeout: Callable[[], float] = lambda: 3600.0,
               times: list[tuple[str, float]] | None = None) -> Shell:
    """``run(cmd)``: ``bash -c cmd`` in ``work``; its stdout and stderr; an AssertionError naming the command when
    it fails or prints a traceback. ``timeout()``: the seconds the next command may take. Each command's seconds
    are appended to ``times`` when given."""
    (work / "data").symlink_to(ROOT / "data")

    def run(cmd: str) -> str:
        t0 = time.monotonic()
        r = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, capture_output=True, text=True,
                           timeout=timeout())
        if times is not None:
            times.append((cmd, time.monotonic() - t0))
        assert r.returncode == 0, (cmd, r.stdout[-3000:], r.stderr[-3000:])
        assert "Traceback" not in r.stderr, (cmd, r.stderr[-3000:])
        return r.stdout + r.stderr

    return run


_HEADS = re.compile(r"^head -n (\d+) data/sample\.jsonl > day1\.jsonl && head -n (\d+) data/sample\.jsonl > day2\.jsonl$")


def run_refresh_example(shell: Shell, scale: int = 1) -> None:
    """The worked example of docs/refresh.md, its inputs ``scale`` times smaller (1: as written). The block's
    comments must say what its ``head`` lines make (day 1: A new; day 2: B - A new, A reused), and each command
    must print its comment, with the counts of the scaled inputs."""
    steps = block("refresh.md", "head -n 100")
    m = _HEADS.match(steps[0][0])
    assert m, steps[0][0]
    a, b = int(m.group(1)), int(m.group(2))
    written = [c for _, c in steps if c.startswith(("version", "up to date"))]
    assert written == [f"version 1: labeled {a} solutions (0 reused)",
                       f"version 2: labeled {b - a} solutions ({a} reused)", "up to date at version 2"], written
    sa, sb = a // scale, b // scale
    assert sa > 0 and sb > sa, (a, b, scale)
    said = {f"version 1: labeled {a} solutions (0 reused)": f"version 1: labeled {sa} solutions (0 reused)",
            f"version 2: labeled {b - a} solutions ({a} reused)":
                f"version 2: labeled {sb - sa} solutions ({sa} reused)"}
    for i, (cmd, comment) in enumerate(steps):
        if i == 0:
            cmd = f"head -n {sa} data/sample.jsonl > day1.jsonl && head -n {sb} data/sample.jsonl > day2.jsonl"
        out = " ".join(shell(cmd).split())
        if comment.startswith(("version", "up to date")):
            want = said.get(comment, comment)
            assert want.rstrip(")") in out, (cmd, want, out[-1500:])


def run_training_quick_path(shell: Shell, work: Path) -> None:
    """The quick path of docs/training.md (label, train, score, eval), new solutions of the bundled task to score
    (the sample's last 20: a gold answer each)."""
    steps = block("training.md", "mcprm label")
    assert [c.split()[:2] for c, _ in steps] == [["mcprm", "label"], ["mcprm", "train"], ["mcprm", "score"],
                                                 ["mcprm", "eval"]]
    shell("tail -n 20 data/sample.jsonl > NEW.jsonl")
    for cmd, _ in steps:
        shell(cmd)
    assert (work / "prm" / "config.json").is_file() and (work / "scored" / "manifest.json").is_file()


def _kind(cmd: str) -> str:
    parts = cmd.split()
    return parts[1] if len(parts) > 1 and parts[0] == "mcprm" and parts[1] in DEFAULT_MAX_S else "other"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=("training", "refresh"), help="one walk-through only")
    for k, v in DEFAULT_MAX_S.items():
        ap.add_argument(f"--max-{k}-s", type=float, default=v, help=f"threshold of one `mcprm {k}` (default {v:g})"
                        if k != "other" else f"threshold of any other command (default {v:g})")
    args = ap.parse_args(argv)
    limits = {k: getattr(args, f"max_{k}_s") for k in DEFAULT_MAX_S}
    rows: list[tuple[str, str, float, float]] = []
    failed: list[str] = []
    for name in ("training", "refresh"):
        if args.only and args.only != name:
            continue
        with tempfile.TemporaryDirectory(prefix=f"mcprm-{name}-") as d:
            work = Path(d) / "work"
            work.mkdir()
            times: list[tuple[str, float]] = []
            shell = make_shell(work, shell_env(Path(d)), times=times)
            try:
                if name == "training":
                    run_training_quick_path(shell, work)
                else:
                    run_refresh_example(shell)
            except (AssertionError, subprocess.TimeoutExpired) as e:
                failed.append(f"{name}: {e}"[:3000])
            for cmd, s in times:
                rows.append((name, cmd, s, limits[_kind(cmd)]))
    print(f"{'walk-through':<12} {'seconds':>9} {'limit':>7}  command")
    for name, cmd, s, lim in rows:
        flag = "  OVER" if s > lim else ""
        print(f"{name:<12} {s:9.1f} {lim:7.0f}  {cmd}{flag}")
        if s > lim:
            failed.append(f"{name}: `{cmd}` took {s:.0f} s, over its {lim:.0f} s")
    print(f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    for f in failed:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
