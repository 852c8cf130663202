"""Edges a newcomer meets in the first hour: `--limit 0` says so; an all-rejected `--skip-bad` start keeps its
rejects file, as the docs say; the README tour's outputs are git-ignored; the docs point readers at the
manifest's shard list, not at a glob over the folder."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app

ROOT = Path(__file__).resolve().parents[2]


def test_limit_zero_says_the_limit_is_zero(tmp_path):
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["label", "--limit", "0", "--output", str(out)])
    assert r.exit_code == 1, r.output
    assert "--limit 0 labels nothing" in r.output and "no valid solutions" not in r.output, r.output
    assert not out.exists()


def test_all_rejected_skip_bad_start_keeps_its_rejects_as_the_docs_say(tmp_path):
    inp = tmp_path / "bad.jsonl"
    inp.write_text("".join(json.dumps({"id": f"b{i}", "problem": "Compute 1 + 1.", "answer": "2", "steps": ["", ""]})
                           + "\n" for i in range(3)))
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["label", "--input", str(inp), "--output", str(out), "--skip-bad", "--executor",
                                 "local", "-q"])
    assert r.exit_code == 1 and "no valid solutions" in r.output, r.output
    rejects = out / "rejects" / "v00001.jsonl"
    assert rejects.is_file() and len(rejects.read_text().splitlines()) == 3
    text = " ".join((ROOT / "docs" / "troubleshooting.md").read_text().split())
    assert "with `--skip-bad`, a start whose every row is rejected stops" in text
    assert "keeps `OUT/rejects/vNNNNN.jsonl`" in text


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
@pytest.mark.parametrize("path", ["prm/config.json", "report/report.html", "scored/manifest.json",
                                  "trl-data/part-0.parquet", "mcprm-out/manifest.json", "solutions.jsonl",
                                  # what label's `next:` hints name for the default --output, and report's default
                                  "mcprm-out-trl/part-0.parquet", "mcprm-out-prm/config.json",
                                  "mcprm-out-new8.jsonl", "mcprm-out-scored/manifest.json",
                                  "mcprm-report/report.html"])
def test_tour_outputs_are_git_ignored(path):
    r = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT)
    assert r.returncode == 0, f"{path} is not git-ignored (.gitignore)"


def test_corpus_doc_says_to_read_the_manifest_not_a_glob():
    text = " ".join((ROOT / "docs" / "corpus.md").read_text().split())
    assert "Read the manifest's shard list, never a glob over the folder." in text


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_every_path_labels_next_hints_name_is_git_ignored(capsys):
    import re

    from cli.label import _next_steps

    _next_steps("mcprm-out")
    hints = capsys.readouterr().out
    paths = sorted(set(re.findall(r"(mcprm-out[\w.-]*)", hints)))
    assert len(paths) >= 5, hints  # the corpus, the export, the PRM, the new solutions, the scored corpus
    for p in paths:
        inside = p if p.endswith(".jsonl") else f"{p}/manifest.json"
        r = subprocess.run(["git", "check-ignore", "-q", inside], cwd=ROOT)
        assert r.returncode == 0, f"{inside} (named by label's next: hints) is not git-ignored"
