"""Ctrl-C in `mcprm train` says what is true: with no checkpoints that a rerun starts over and how to make a run
resumable; with checkpoints (--save-steps) that --resume goes on from the last one. The output is a file here
(not a terminal): plain progress lines, no bar escapes, no loss dictionaries."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from pipeline.bundled import MODEL_DIR
from tests.pipeline.prm_fixtures import make_corpus

from .conftest import ROOT, budget, mcprm_cmd, wait_for


def _start(tmp_path, *extra):
    log = tmp_path / "train.log"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1")
    with open(log, "w") as f:
        p = subprocess.Popen(mcprm_cmd("train", str(tmp_path / "corpus"), "--output", str(tmp_path / "prm"),
                                       "--base-model", str(MODEL_DIR), "--epochs", "100000", *extra),
                             cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, text=True)
    return p, log


def _interrupt(p, log) -> str:
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=budget(120))
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout=30)
        raise
    return log.read_text()


@pytest.mark.parametrize("save_steps", [0, 1])
def test_ctrl_c_in_train_says_what_a_rerun_does(tmp_path, save_steps):
    make_corpus(tmp_path / "corpus")
    p, log = _start(tmp_path, "--save-steps", str(save_steps))
    try:
        if save_steps:
            ckpt = tmp_path / "prm" / "checkpoints"
            wait_for(lambda: any((c / "trainer_state.json").exists() for c in ckpt.glob("checkpoint-*")), budget(300),
                     "a first checkpoint", p)
        else:
            wait_for(lambda: "optimizer steps over" in log.read_text(), budget(300), "training to start", p)
        text = _interrupt(p, log)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)
    assert p.returncode == 130, text
    assert "Traceback" not in text and "\x1b[" not in text and "\r" not in text and "{'" not in text, text
    assert "[mcprm] train: " in text
    if save_steps:
        assert "is the last checkpoint: rerun the same command with --resume" in text, text
    else:
        assert "nothing was saved" in text and "rerunning starts over" in text and "--save-steps N" in text, text
        assert "--resume" in text  # how to go on after the next interrupt
