"""`train`, `score` and `generate` on a CPU run torch at the threads `label`'s workers use (pipeline.config:
cpu_torch_threads, one unless OMP_NUM_THREADS says otherwise): each command is run here, in this process, from
torch at two threads, and the setting it ran with is read back (torch's own, and what its output records)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cli.main import app
from pipeline.bundled import MODEL_DIR, PROBLEMS_PATH
from pipeline.config import CPU_WORKER_THREADS
from tests.pipeline.prm_fixtures import ROWS, make_corpus


@pytest.fixture
def two_threads(monkeypatch):
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    torch.set_num_threads(2)
    yield torch
    torch.set_num_threads(before)


def run(*args):
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r


def test_train_score_and_generate_pin_cpu_threads_as_label_does(tmp_path, two_threads, monkeypatch):
    torch = two_threads
    make_corpus(tmp_path / "corpus")
    run("train", tmp_path / "corpus", "--output", tmp_path / "prm", "--base-model", MODEL_DIR, "--epochs", "1",
        "--no-progress")
    card = json.loads((tmp_path / "prm" / "mcprm_card.json").read_text())
    assert card["training"]["speed"]["torch_threads"] == CPU_WORKER_THREADS == torch.get_num_threads() == 1

    torch.set_num_threads(2)
    sols = tmp_path / "sols.jsonl"
    sols.write_text("".join(json.dumps({"id": sid, "problem": f"Problem {sid}", "steps": steps}) + "\n"
                            for sid, steps, *_ in ROWS))
    run("score", tmp_path / "prm", "--input", sols, "--output", tmp_path / "scored", "--device", "cpu")
    manifest = json.loads((tmp_path / "scored" / "manifest.json").read_text())
    assert manifest["config"]["torch_threads"] == torch.get_num_threads() == 1

    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(x + "\n" for x in PROBLEMS_PATH.read_text().splitlines()[:2]))
    for omp, want in ((None, 1), ("3", 3)):  # a user's OMP_NUM_THREADS is their choice
        if omp:
            monkeypatch.setenv("OMP_NUM_THREADS", omp)
        torch.set_num_threads(2)
        run("generate", "--input", problems, "--output", tmp_path / "gen.jsonl", "--n", "1", "--max-new-tokens",
            "8", "--no-progress")
        assert torch.get_num_threads() == want
