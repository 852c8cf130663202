"""The strategy simulator (bench/simulate_gate.py): mcprm's scheduler on a per-step corpus's stored draws. Checked
against the stored corpus itself (per-step replayed on its own draws gives its own labels and draws) and against a
real gated GPU run on the same solutions (bench/gpu_e2e/results/s14: per-step K=8 and the step-1 reach gate at
seed 50502, ProcessBench-MATH dev, the real 1.5B model)."""

from __future__ import annotations

import importlib.util
import json
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
S14 = ROOT / "bench" / "gpu_e2e" / "results" / "s14"
GATE = "--reach-gate --reach-probe step1 --k 8 --trust-pass-rate 0.25 --unreached-claim step1"


def _script():
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("simulate_gate", ROOT / "bench" / "simulate_gate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def s14(tmp_path_factory):
    d = tmp_path_factory.mktemp("s14")
    with tarfile.open(S14 / "h50d_corpus.tgz") as t:
        t.extractall(d, filter="data")
    return d


def _rows(path):
    from pipeline.corpus import read_corpus

    mod = _script()
    return sorted(read_corpus(str(path), columns=mod.COLUMNS).to_pylist(), key=lambda r: str(r["id"]))


def test_per_step_on_its_own_draws_gives_its_own_labels_and_draws(s14):
    mod = _script()
    rows = _rows(s14 / "per-step-k8")
    out = mod.simulate(rows, *mod.label_options("--strategy per-step --k 8"))
    assert [o.rollouts for o in out] == [sum(n - r for n, r in zip(x["mc_total"], x["mc_reused"])) for x in rows]
    # the same first errors but where rollout reuse credited a later prefix in the run (no reuse here)
    same = sum(o.first_error == x["first_error"] for o, x in zip(out, rows))
    credited = sum(any(c > 0 for c in x["mc_reused_correct"]) for x in rows)
    assert same >= len(rows) - credited and same >= 0.98 * len(rows)


def test_the_gate_simulated_costs_what_the_gpu_run_drew(s14):
    mod = _script()
    rows = _rows(s14 / "per-step-k8")
    from pipeline.corpus import read_corpus

    gate = {str(r["id"]): r for r in read_corpus(str(s14 / "step1-gate"),
                                                  columns=["id", "rollouts", "label_status"]).to_pylist()}
    out = mod.simulate(rows, *mod.label_options(GATE))
    drawn = sum(o.rollouts for o in out)
    manifest = json.loads((s14 / "step1-gate" / "manifest.json").read_text())
    # the run's own draws: its rollouts less those drawn ahead under the engine's capacity and dropped
    run = manifest["counts"]["rollouts"] - manifest["counts"]["drawn_ahead_dropped"]
    assert sum(gate[str(r["id"])]["rollouts"] for r in rows) == manifest["counts"]["rollouts"]
    # since that run a right answer's full prefix is never drawn: a little under the run, not far
    assert 0.85 * run <= drawn <= run
    # the statuses the run stored, within a few rows each (other draws of the same rates)
    for status in ("trusted", "searched", "unreached"):
        sim = sum(o.extra.get("label_status") == status for o in out)
        real = sum(g["label_status"] == status for g in gate.values())
        assert abs(sim - real) <= 0.1 * len(rows), status


def test_a_constructed_search_finds_the_first_dead_prefix():
    mod = _script()
    row = {"id": "r", "problem": "p", "steps": ["a", "b", "c", "d", "e"], "first_error": 2,
           "solution_correct": False, "mc_correct": [4, 4, 0, 0, 0], "mc_total": [4, 4, 4, 4, 0],
           "mc_reused": [0] * 5, "mc_reused_correct": [0] * 5, "rollouts": 16, "rollout_tokens": 1600}
    [o] = mod.simulate([row], *mod.label_options("--k 4 --no-speculate --relative-drop 0"))
    assert o.first_error == 2 and o.labels[:3] == [True, True, False]
    assert 0 < o.rollouts < 16  # a binary search: fewer draws than per-step's
