"""The house's layers, drawn from the code (tests/import_graph.py): one concept a module, kept by the arrows
between them rather than by a line count. No import circle in the product code; no arrow a layer must never have
(storage knows nothing of labeling, input or commands; pipeline.stats imports nothing from pipeline; graders and
rollouts know nothing of pipeline; run, training know nothing of commands; input nothing of labeling or
execution); no arrow from a folder of pipeline/ back up to a folder above it; and no two folders (or root
modules) that import each other, so each folder reads as one room with its doors on one side."""

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


def test_no_arrow_runs_back_up(import_graph, edges):
    assert import_graph.upward(edges) == []


def test_no_two_way_folder_ties(import_graph, edges):
    ties = import_graph.two_way(edges)
    pairs = import_graph.folder_edges(edges)
    assert ties == [], [(a, b, pairs[(a, b)][:2], pairs[(b, a)][:2]) for a, b in ties]


def test_the_folder_checks_can_fail(import_graph):
    # the folder rules named in the layers: each drawn by hand is reported
    for src, dst in [("pipeline.run", "pipeline.commands"), ("pipeline.input", "pipeline.labeling"),
                     ("pipeline.input", "pipeline.execution"), ("pipeline.training", "pipeline.commands")]:
        fake = {f"{src}.a": {f"{dst}.b"}, f"{dst}.b": set()}
        assert import_graph.forbidden(fake) == [(f"{src}.a", f"{dst}.b")]
        assert import_graph.upward(fake) == [(f"{src}.a", f"{dst}.b")]  # each is an arrow back up too
    # an arrow down the floors is fine; one back up is reported; the root modules (config) stand below every floor
    down = {"pipeline.run.plan": {"pipeline.input.reading", "pipeline.config"}, "pipeline.input.reading": set(),
            "pipeline.config": set()}
    assert import_graph.upward(down) == [] and import_graph.two_way(down) == []
    up = {"pipeline.storage.x": {"pipeline.labeling.y"}, "pipeline.labeling.y": set()}
    assert import_graph.upward(up) == [("pipeline.storage.x", "pipeline.labeling.y")]
    # two folders that import each other (no module circle: different modules) are a two-way tie, as are a folder
    # and a root module; a folder's own modules importing each other are not
    tie = {"pipeline.labeling.w": {"pipeline.input.spec"}, "pipeline.input.p": {"pipeline.labeling.v"},
           "pipeline.input.spec": set(), "pipeline.labeling.v": set()}
    assert import_graph.cycles(tie) == []
    assert import_graph.two_way(tie) == [("pipeline.input", "pipeline.labeling")]
    assert import_graph.two_way({"pipeline.config": {"pipeline.labeling.s"},
                                 "pipeline.labeling.w": {"pipeline.config"}}) == [("pipeline.config", "pipeline.labeling")]
    assert import_graph.two_way({"pipeline.run.a": {"pipeline.run.b"}, "pipeline.run.b": {"pipeline.run.c"}}) == []
    assert import_graph.folder("pipeline.run") == import_graph.folder("pipeline.run.plan") == "pipeline.run"
    assert import_graph.folder("pipeline.config") == "pipeline.config" and import_graph.folder("graders.x") == "graders"


def test_every_folder_of_pipeline_has_a_floor(import_graph, edges):
    # a new folder of pipeline/ must be placed on a floor, or it would escape the arrow-back-up check
    folders = {import_graph.folder(m) for m in edges if m.startswith("pipeline.") and any(
        o.startswith(m + ".") for o in edges) and m.count(".") == 1}
    assert folders - set(import_graph.FLOORS) == import_graph.UNFLOORED


# The packages that turn a URL into a file system: only pipeline/storage/ imports them (pipeline.storage.fs), so
# credentials and a store's options have one way in and every command reads and writes URLs alike.
FILESYSTEM_PACKAGES = ("fsspec", "s3fs", "gcsfs", "adlfs")


def _filesystem_imports(sources: dict[str, str]) -> list[tuple[str, str]]:
    """(module, package) for each module outside pipeline.storage whose source imports a file-system package,
    lazy imports and ``importlib.import_module("...")`` included."""
    import ast

    def top(name: str) -> str:
        return name.split(".", 1)[0]

    found = []
    for module, source in sorted(sources.items()):
        if module == "pipeline.storage" or module.startswith("pipeline.storage."):
            continue
        for node in ast.walk(ast.parse(source)):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
                  in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant)
                  and isinstance(node.args[0].value, str)):
                names = [node.args[0].value]
            found += [(module, top(n)) for n in names if top(n) in FILESYSTEM_PACKAGES]
    return found


def test_only_storage_turns_a_url_into_a_file_system(import_graph):
    sources = {m: p.read_text() for m, p in import_graph.modules().items()}
    assert "pipeline.storage.fs" in sources and _filesystem_imports(sources) == []
    # the check sees every way in, and leaves pipeline/storage/ alone
    fake = {"cli.a": "def f():\n    import fsspec\n", "pipeline.input.b": "from s3fs import S3FileSystem\n",
            "pipeline.c": "import importlib\nimportlib.import_module('fsspec.core')\n",
            "pipeline.storage.fs": "import fsspec\n", "pipeline.d": "import fsspecial\n"}
    assert _filesystem_imports(fake) == [("cli.a", "fsspec"), ("pipeline.c", "fsspec"), ("pipeline.input.b", "s3fs")]
