"""A model given by its hub name on a machine where the hub does not answer: one clear line at once (not a
minute of the hub client's retries ending in a storage error), and no output folder left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def mcprm(tmp_path, *args, **env):
    e = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
             HF_HOME=str(tmp_path / "hf-home"),  # an empty cache
             HF_ENDPOINT="http://127.0.0.1:9",  # the discard port: nothing answers, the connection is refused
             OMP_NUM_THREADS="1", **env)
    for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):  # either turns the hub client offline
        e.pop(k, None)
    e.update(env)
    return subprocess.run([sys.executable, "-m", "cli.main", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=e, timeout=300)


@pytest.mark.parametrize("command", ["label", "generate", "train"])
def test_a_hub_name_without_network_fails_at_once_with_one_line(tmp_path, command):
    out = tmp_path / "out"
    if command == "train":
        from tests.pipeline.prm_fixtures import make_corpus

        make_corpus(tmp_path / "corpus")
        args = ("train", tmp_path / "corpus", "--base-model", "some-org/no-such-model", "--output", out)
    else:
        args = (command, "--model", "some-org/no-such-model", "--output",
                out if command == "label" else out / "s.jsonl")
    r = mcprm(tmp_path, *args)
    assert r.returncode == 1, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "some-org/no-such-model not found locally and the hub (http://127.0.0.1:9) is unreachable" in errors[0]
    assert "huggingface-cli download some-org/no-such-model" in errors[0]
    assert not out.exists()


def test_offline_mode_without_the_model_cached_says_so(tmp_path):
    r = mcprm(tmp_path, "label", "--model", "some-org/no-such-model", "--output", tmp_path / "out",
              HF_HUB_OFFLINE="1")
    assert r.returncode == 1 and "not found locally and HF_HUB_OFFLINE is set" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_a_cached_model_loads_from_the_cache_when_the_hub_does_not_answer(tmp_path):
    import shutil

    from pipeline.bundled import MODEL_DIR, PROBLEMS_PATH

    # the hub cache's layout (huggingface_hub): refs/main names a snapshot holding the files
    repo = tmp_path / "hf-home" / "hub" / "models--some-org--cached-model"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    shutil.copytree(MODEL_DIR, repo / "snapshots" / ("0" * 40))
    problems = tmp_path / "p.jsonl"
    problems.write_text(PROBLEMS_PATH.read_text().splitlines()[0] + "\n")
    r = mcprm(tmp_path, "generate", "--model", "some-org/cached-model", "--input", problems, "--n", "1",
              "--max-new-tokens", "8", "--output", tmp_path / "s.jsonl", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "s.jsonl").exists()
