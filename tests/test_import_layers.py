"""The house's layers, drawn from the code (tests/import_graph.py): no import circle in the product code, and no
arrow a layer must never have (storage knows nothing of labeling, input or commands; pipeline.stats imports
nothing from pipeline; graders and rollouts know nothing of pipeline), and no product module over 500 lines."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Circles left open, each with the issue that owns the room (a new one fails the test; a closed one must leave
# this list, see test_known_cycles_still_exist).
KNOWN_CYCLES: list[list[str]] = []


@pytest.fixture(scope="module")
def import_graph():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "tests" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_graph"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def edges(import_graph):
    return import_graph.graph()


def test_the_graph_sees_the_imports(edges):
    # the graph is drawn from the AST, lazy imports included: a known arrow of each kind must be found
    assert "pipeline.storage.store" in edges["pipeline.storage.integrity"]  # top-level `from ... import`
    assert "pipeline.storage.schema" in edges["pipeline.storage.integrity"]  # inside a function
    assert "graders.registry" in edges["graders"]  # a package's __init__
    assert len(edges) > 90


def test_no_import_cycles(import_graph, edges):
    assert [c for c in import_graph.cycles(edges) if c not in KNOWN_CYCLES] == []


def test_known_cycles_still_exist(import_graph, edges):
    found = import_graph.cycles(edges)
    assert [c for c in KNOWN_CYCLES if c not in found] == [], "a circle was closed: remove it from KNOWN_CYCLES"


def test_no_forbidden_arrows(import_graph, edges):
    assert import_graph.forbidden(edges) == []


def test_the_checks_can_fail(import_graph):
    # a circle and a forbidden arrow, drawn by hand, are both reported
    fake = {"pipeline.storage.a": {"pipeline.labeling.b"}, "pipeline.labeling.b": {"pipeline.storage.a"}}
    assert import_graph.cycles(fake) == [["pipeline.labeling.b", "pipeline.storage.a"]]
    assert import_graph.forbidden(fake) == [("pipeline.storage.a", "pipeline.labeling.b")]
    # a module importing its own package's __init__ is not a circle
    assert import_graph.cycles({"graders": {"graders.x"}, "graders.x": {"graders"}}) == []
    # pipeline.stats may import itself, nothing else of pipeline
    assert import_graph.forbidden({"pipeline.stats.a": {"pipeline.stats.b", "pipeline.errors"}}) == [
        ("pipeline.stats.a", "pipeline.errors")
    ]


# Modules over the limit, each with the room that owns it (a new one fails; a shortened one must leave the list).
MAX_LINES = 500
KNOWN_LONG: set[str] = {
    "pipeline/execution/fleet.py",  # one concept, warm workers (actor, leases, a run's side, fleets, this machine's)
}


def test_no_module_over_500_lines():
    long = {str(p.relative_to(ROOT)) for package in ("pipeline", "graders", "rollouts", "cli")
            for p in (ROOT / package).rglob("*.py") if len(p.read_text().splitlines()) > MAX_LINES}
    assert long - KNOWN_LONG == set(), f"over {MAX_LINES} lines: split by responsibility (docs/architecture.md)"
    assert KNOWN_LONG - long == set(), "a known long module got short: remove it from KNOWN_LONG"
