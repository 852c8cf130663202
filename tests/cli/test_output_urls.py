"""An output that names no folder of its own is refused before anything is read or written: ``--output ''`` (fsspec
would take it for the current folder) and ``--output /`` (the root of the file system)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipeline.bundled import SAMPLE_PATH
from pipeline.storage.output import BadOutput, check_output_folder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("url", ["", "   ", "/", "file:///", "//"])
def test_refused(url):
    with pytest.raises(BadOutput, match="is empty|root of the file system"):
        check_output_folder(url)


@pytest.mark.parametrize("url, says", [("", "--output is empty"), ("/", "--output / is the root of the file system")])
def test_label_refuses_it_with_one_line_and_writes_nothing(url, says, tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "cli.main", "label", "--input", str(SAMPLE_PATH), "--output", url,
                        "--executor", "local", "-q"], capture_output=True, text=True, cwd=tmp_path, env=env,
                       timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert says in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert os.listdir(tmp_path) == []  # nothing in the current folder
