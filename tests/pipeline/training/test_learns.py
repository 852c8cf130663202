"""A PRM trained by ``train()`` on the bundled task learns something a step's position alone does not tell:
on held-out problems its step scores rank good steps above wrong ones better than "later steps are worse" does.

Real parts: the bundled model and sample, the exact checker's labels, a real Parquet corpus, the HF Trainer on
CPU. Train on 80 solutions, measure on the last 100 (disjoint problems); the recipe study's 200 is
bench/checks/prm_learns.py, which this test calls. The truth is the exact checker's.
Both kinds (a head at the separator; an implicit PRM read through the LM's head). A PRM whose labels were
misaligned with its separators, or whose head read the wrong positions, ranks no better than position (BENCHMARKS.md, issue 28: the PRM recipe study, where such a PRM reaches step AUC ~0.8 against
~0.7 for position at 300 solutions)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.slow  # two PRM trainings (started first: tests/conftest.py)


def _prm_learns():
    spec = importlib.util.spec_from_file_location("prm_learns", ROOT / "bench" / "checks" / "prm_learns.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# 80 training solutions, not the study's 200 (bench/checks/prm_learns.py runs that size), for the suite's time:
# the one size tried, on this held-out set, step AUC head 0.799 and implicit 0.728 against 0.691 for position
# (at 200: 0.818 and 0.704).
TRAIN = 80


@pytest.mark.parametrize("kind", ["head", "implicit"])
def test_trained_prm_ranks_held_out_steps_better_than_their_position(tmp_path, kind):
    m = _prm_learns().measure(kind, TRAIN, tmp_path)
    assert m["prm_auc"] > m["position_auc"], m
