"""docs/troubleshooting.md's examples, run exactly as written in an empty folder (issue 25): every `$ ` line is a
shell command (`mcprm` is this checkout's CLI); the lines after it are the start of what it prints, a line
ending in `…` a prefix of the printed line. Blocks marked `console no-gpu` run only on a machine without a GPU."""

from __future__ import annotations

import re
import subprocess

import pytest

from .conftest import ROOT, shell_env

DOC = ROOT / "docs" / "troubleshooting.md"


def _blocks() -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """(marker, [(command, expected output lines)]) of each console block."""
    out = []
    for m in re.finditer(r"```console([^\n]*)\n(.*?)```", DOC.read_text(), re.S):
        steps: list[tuple[str, list[str]]] = []
        for line in m.group(2).splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line)
        out.append((m.group(1).strip(), steps))
    return out


@pytest.mark.parametrize("index", range(len(_blocks())))
def test_doc_example(index, tmp_path):
    from rollouts.devices import nvidia_gpus

    marker, steps = _blocks()[index]
    if marker == "no-gpu" and nvidia_gpus():
        pytest.skip("a no-GPU example on a machine with a GPU")
    env = shell_env(tmp_path, COLUMNS="200")
    work = tmp_path / "work"
    work.mkdir()
    for cmd, expected in steps:
        r = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        got = (r.stdout + r.stderr).splitlines()
        if not cmd.startswith("mcprm") or not expected:
            assert r.returncode == 0, (cmd, r.stdout + r.stderr)
            continue
        assert r.returncode != 0, (cmd, r.stdout + r.stderr)  # every mcprm example here is an error
        assert len(got) >= len(expected), (cmd, got)
        for want, line in zip(expected, got):
            if want.endswith("…"):
                assert line.startswith(want[:-1]), (cmd, want, line)
            else:
                assert line == want, (cmd, want, line)
    assert not (work / "mcprm-out").exists() or not any((work / "mcprm-out").iterdir())  # nothing written
