"""README's tour, run as written (issue 25: every CPU command of the front page is run by a test). The corpus it
starts from is a small one labeled first (the README's own `mcprm label` is the main job CI runs whole); then
every line of the tour's block runs in order, in a folder where `data/` is this checkout's, and must succeed."""

from __future__ import annotations

import re
import subprocess

import pytest

from .conftest import ROOT, budget, shell_env


def _tour() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## After `label`: a short tour", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


@pytest.mark.timeout(1800)  # a small label, then every tour command (train, report, ...) on a loaded 2-core box
def test_readme_tour_runs_as_written(small_input, tmp_path):
    cmds = _tour()
    assert cmds and all(c.startswith("mcprm ") for c in cmds)
    env = shell_env(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "data").symlink_to(ROOT / "data")
    first = ["mcprm", "label", "--input", small_input, "--output", "mcprm-out", "--k", "2", "--max-new-tokens", "48",
             "--executor", "local"]
    r = subprocess.run(first, cwd=work, env=env, capture_output=True, text=True, timeout=budget(600))
    assert r.returncode == 0, r.stdout + r.stderr
    for cmd in cmds:
        if cmd.startswith("mcprm train"):
            cmd += " --epochs 1"  # the tour's train, shortened: the training itself is test_train_score's
        r = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, capture_output=True, text=True,
                           timeout=budget(900))
        assert r.returncode == 0, (cmd, r.stdout[-2000:], r.stderr[-2000:])
        assert "Traceback" not in r.stderr, (cmd, r.stderr[-2000:])
    assert (work / "mcprm-out-trl").is_dir() and (work / "mcprm-report" / "report.html").is_file()
    assert (work / "mcprm-out-prm").is_dir()
