"""The CPU command blocks of docs/refresh.md and docs/training.md, run as written (every CPU command of the docs
is run by a test; `mcprm label && mcprm train mcprm-out --output prm && mcprm score prm ...` works on CPU from a
fresh clone). Each `# comment` after a command that reads like output is checked against what the command printed.

The inputs are a tenth of the docs' size or less (the refresh example's ``head`` lines; the quick path's ``mcprm
label`` labels its first 18 solutions: the smallest start of the sample that still holds a problem out of
training, row 17, so that train calibrates on a held-out problem as at full size): every command as written, on
less data. The full size is a measurement, with
thresholds: bench/checks/doc_paths.py, which runs the same functions."""

from __future__ import annotations

import importlib.util

import pytest

from .conftest import ROOT, budget

pytestmark = pytest.mark.slow  # the docs' walk-throughs: minutes of real commands (started first: tests/conftest.py)


def _doc_paths():
    spec = importlib.util.spec_from_file_location("doc_paths", ROOT / "bench" / "checks" / "doc_paths.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


doc_paths = _doc_paths()


def _shell(tmp_path, label_limit=None):
    work = tmp_path / "work"
    work.mkdir()
    env = doc_paths.shell_env(tmp_path, label_limit=label_limit)
    return doc_paths.make_shell(work, env, timeout=lambda: budget(1200)), work


@pytest.mark.timeout(900)  # a few small runs on a loaded 2-core machine
def test_refresh_worked_example(tmp_path):
    shell, _ = _shell(tmp_path)
    doc_paths.run_refresh_example(shell, scale=10)


@pytest.mark.timeout(1200)  # label (18 solutions, the defaults), train, score, eval on a loaded 2-core machine
def test_training_quick_path(tmp_path):
    import json

    shell, work = _shell(tmp_path, label_limit=18)
    doc_paths.run_training_quick_path(shell, work)
    # the smaller input still exercises what the full one does: a held-out problem, and steps of both labels
    data = json.loads((work / "prm" / "mcprm_card.json").read_text())["data"]
    assert data["val_problems"] >= 1 and data["train_negative"] > 0 and data["train_positive"] > 0, data


@pytest.mark.timeout(60)  # runs no command: the scaled checks alone
def test_refresh_example_fails_when_a_command_does_not_print_its_comment():
    """The scaled example's checks can fail: a run that prints other counts than the scaled comment is caught,
    and the ``head`` lines run are the doc's, a tenth as large."""
    ran = []

    def shell(cmd):
        ran.append(cmd)
        return "version 1: labeled 100 solutions (0 reused)"  # the doc's count, not the scaled run's

    with pytest.raises(AssertionError, match="labeled 10 solutions"):
        doc_paths.run_refresh_example(shell, scale=10)
    assert ran == ["head -n 10 data/sample.jsonl > day1.jsonl && head -n 20 data/sample.jsonl > day2.jsonl",
                   "mcprm label --input day1.jsonl --output corpus --k 4"]
