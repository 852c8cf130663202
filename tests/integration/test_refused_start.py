"""Issue 25: a start that is refused leaves nothing behind. Bad input rows are reported before any rollout and
no output folder the run created is left (``mcprm label`` and ``pipeline.run.label()`` alike); library users get
the same device and backend checks as the CLI, before anything is staged under OUT/data/vN/_staged."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from pipeline.config import ConfigError
from pipeline.input import InputError
from pipeline.run import label

from .conftest import ROOT, make_cfg, mcprm_cmd


def _bad_input(small_input, tmp_path, bad_line: int = 5) -> str:
    rows = [json.loads(x) for x in open(small_input).read().splitlines()]
    rows.insert(bad_line - 1, {"id": "no-steps", "problem": "What is 1 + 1?", "answer": "2"})
    p = tmp_path / "in.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(p)


def _tree(path) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), path) for d, ds, fs in os.walk(path) for n in ds + fs)


def test_cli_bad_rows_leave_no_default_output_folder(small_input, tmp_path):
    """`mcprm label` in a folder without mcprm-out/: refused with the row named, and still no mcprm-out/."""
    inp = _bad_input(small_input, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(mcprm_cmd("label", "--input", inp, "--k", "2", "--max-new-tokens", "16", "--no-progress"),
                       capture_output=True, text=True, timeout=300, cwd=work, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{inp} line 5" in r.stderr and "steps" in r.stderr, r.stderr
    assert os.listdir(work) == [], _tree(work)


def test_library_bad_rows_after_staged_shards_leave_no_created_folders(small_input, tmp_path):
    """The bad row comes after two shards were staged: the staging is discarded and every folder the run made
    (the output and its missing parents) is gone; the folder that was there before stays."""
    inp = _bad_input(small_input, tmp_path)
    out = tmp_path / "new" / "deeper" / "out"
    with pytest.raises(InputError, match="line 5"):
        label(make_cfg(inp, str(out), shard_size=2))
    assert not (tmp_path / "new").exists()
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]


def test_an_existing_output_folder_stays(small_input, tmp_path):
    inp = _bad_input(small_input, tmp_path)
    out = tmp_path / "out"
    (out / "notes").mkdir(parents=True)
    with pytest.raises(InputError):
        label(make_cfg(inp, str(out), shard_size=2))
    assert _tree(out) == ["notes"]  # the user's (empty) folders are theirs: nothing removed, nothing added


def test_library_users_get_the_device_checks_before_any_staging(small_input, tmp_path):
    from rollouts.devices import nvidia_gpus

    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="is not a device name"):
        label(make_cfg(small_input, str(out), device="gpu"))
    assert not out.exists()
    if nvidia_gpus():
        pytest.skip("this machine has a GPU: the no-GPU messages are not what it says")
    for options, says in ((dict(device="cuda"), "this machine has no GPU"),
                          (dict(backend="vllm"), "this machine has none")):
        with pytest.raises(ConfigError, match=says):
            label(make_cfg(small_input, str(out), **options))
        assert not out.exists()  # no OUT/data/v00001/_staged left behind
