"""The CPU command blocks of docs/refresh.md and docs/training.md, run as written (issue 25: every CPU command of
the docs is run by a test; issue 28: `mcprm label && mcprm train mcprm-out --output prm && mcprm score prm ...`
works on CPU from a fresh clone). Each `# comment` after a command that reads like output is checked against
what the command printed."""

from __future__ import annotations

import re
import subprocess

import pytest

from .conftest import ROOT, budget, shell_env


def _block(doc: str, first: str) -> list[tuple[str, str]]:
    """(command, comment) of each line of the first ```bash block of ``doc`` whose first line starts with ``first``."""
    for m in re.finditer(r"```bash\n(.*?)```", (ROOT / "docs" / doc).read_text(), re.S):
        lines = [line for line in m.group(1).splitlines() if line.strip()]
        if lines and lines[0].startswith(first):
            return [(line.split("  #", 1)[0].strip(), line.split("  #", 1)[1].strip() if "  #" in line else "")
                    for line in lines]
    raise AssertionError(f"docs/{doc} has no bash block starting with {first!r}")


@pytest.fixture
def shell(tmp_path):
    env = shell_env(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "data").symlink_to(ROOT / "data")

    def run(cmd: str) -> str:
        r = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, capture_output=True, text=True,
                           timeout=budget(1800))
        assert r.returncode == 0, (cmd, r.stdout[-3000:], r.stderr[-3000:])
        assert "Traceback" not in r.stderr, (cmd, r.stderr[-3000:])
        return r.stdout + r.stderr

    run.work = work
    return run


@pytest.mark.timeout(1800)  # a few small runs; on a loaded 2-core machine several minutes
def test_refresh_worked_example(shell):
    for cmd, comment in _block("refresh.md", "head -n 100"):
        out = " ".join(shell(cmd).split())
        if comment.startswith(("version", "up to date")):
            assert comment.rstrip(")") in out, (cmd, comment, out[-1500:])


# `mcprm label` as written (the whole bundled sample) took 20 min 43 s on a 2-core machine with other work
# running, before train, score and eval: the test's budget holds that; each command gets what is left of it
@pytest.mark.timeout(3600)
def test_training_quick_path(shell):
    steps = _block("training.md", "mcprm label")
    assert [c.split()[:2] for c, _ in steps] == [["mcprm", "label"], ["mcprm", "train"], ["mcprm", "score"],
                                                 ["mcprm", "eval"]]
    shell("tail -n 20 data/sample.jsonl > NEW.jsonl")  # new solutions of the bundled task (a gold answer each)
    for cmd, _ in steps:
        shell(cmd)
    assert (shell.work / "prm" / "config.json").is_file() and (shell.work / "scored" / "manifest.json").is_file()
