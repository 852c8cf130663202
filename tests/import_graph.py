"""The import graph of the product code (pipeline/, graders/, rollouts/, cli/), drawn from the AST.

    python tests/import_graph.py            # print the cycles, forbidden arrows and folder ties, exit 1 if any
    python tests/import_graph.py --edges    # print every edge as "a -> b"

Every import counts, including those inside functions (a lazy import is still an arrow between rooms).
tests/test_import_layers.py asserts the same rules.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("pipeline", "graders", "rollouts", "cli")

# (importer prefix, imported prefix): arrows that must never exist (an importer's own package is always allowed).
FORBIDDEN = (
    ("pipeline.stats", "pipeline."),
    ("pipeline.storage", "pipeline.labeling"),
    ("pipeline.storage", "pipeline.input"),
    ("pipeline.storage", "pipeline.commands"),
    ("pipeline.storage", "pipeline.execution"),
    ("pipeline.storage", "pipeline.training"),
    ("graders", "pipeline"),
    ("graders", "rollouts"),
    ("graders", "cli"),
    ("rollouts", "pipeline"),
    ("rollouts", "cli"),
    ("pipeline", "cli"),
    # folders of pipeline/ that a folder must never reach into, whatever the floors below say
    ("pipeline.run", "pipeline.commands"),  # commands call label(), never the other way round
    ("pipeline.input", "pipeline.labeling"),  # reading the input knows nothing of labels
    ("pipeline.input", "pipeline.execution"),  # nor of where shards run
    ("pipeline.training", "pipeline.commands"),  # the commands drive training, never the other way round
    # strategies and the scheduler are pure policy over a backend: the options read their registry, so they
    # never read the configuration (the shard worker, in execution/, builds their settings from it)
    ("pipeline.labeling", "pipeline.config"),
    ("pipeline.labeling", "pipeline.options"),
    ("pipeline.labeling", "pipeline.execution"),
)

# The floors of pipeline/'s folders, top first: a module may import its own folder, any folder below it, and the
# modules at pipeline/'s root (config, options, errors, ...: the ground every floor stands on, checked by the
# circle and two-way rules); an arrow to a folder above its own runs back up. export/ sits above judge/ (genprm's
# export asks the judge's critique prompt) and training/ (the tokenized formats); bundled/ below input/, which
# reads its advice about the bundled model.
FLOORS = (
    "pipeline.commands",
    "pipeline.export",
    "pipeline.judge",
    "pipeline.training",
    "pipeline.run",
    "pipeline.execution",
    "pipeline.labeling",
    "pipeline.input",
    "pipeline.bundled",
    "pipeline.storage",
    "pipeline.stats",
)
UNFLOORED: set[str] = set()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that `name` names (a.b.c -> a.b if c is a symbol in a.b)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                drop = node.level - 1 if is_package else node.level
                base = base[: len(base) - drop] if drop else base
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names = [f"{prefix}.{alias.name}" for alias in node.names] or [prefix]
        else:
            continue
        for name in names:
            target = _resolve(name, known)
            if target and target != module:
                targets.add(target)
    return targets


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    known = modules(root)
    return {module: imports_of(module, path, known) for module, path in known.items()}


def _package_of(module: str, edges: dict[str, set[str]]) -> bool:
    return any(other.startswith(module + ".") for other in edges)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), ignoring package __init__ re-exports:
    a package importing its own members is how a package works, not a circle."""
    pruned = {
        m: {t for t in ts if not (_package_of(t, edges) and m.startswith(t + "."))} for m, ts in edges.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(pruned.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(pruned):
        if node not in index:
            visit(node)
    return found


def _under(module: str, prefix: str) -> bool:
    return module == prefix.rstrip(".") or module.startswith(prefix if prefix.endswith(".") else prefix + ".")


def forbidden(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    bad = []
    for source, targets in sorted(edges.items()):
        for target in sorted(targets):
            for src_prefix, dst_prefix in FORBIDDEN:
                if _under(source, src_prefix) and _under(target, dst_prefix) and not _under(target, src_prefix):
                    bad.append((source, target))
                    break
    return bad


def folder(module: str) -> str:
    """The room a module belongs to for the folder rules: a folder of pipeline/ (``pipeline.run``), a module at
    pipeline/'s root (``pipeline.config``: a room of its own), or a top-level package (``graders``)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "pipeline" and len(parts) > 1 else parts[0]


def folder_edges(edges: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """(folder, folder) -> the module arrows that make it ("a -> b"), between different folders only."""
    out: dict[tuple[str, str], list[str]] = {}
    for source, targets in sorted(edges.items()):
        for target in sorted(targets):
            pair = (folder(source), folder(target))
            if pair[0] != pair[1]:
                out.setdefault(pair, []).append(f"{source} -> {target}")
    return out


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Arrows from a folder of :data:`FLOORS` to a folder above it."""
    floor = {f: i for i, f in enumerate(FLOORS)}
    bad = []
    for (a, b), arrows in folder_edges(edges).items():
        if a in floor and b in floor and floor[b] < floor[a]:
            bad += [tuple(arrow.split(" -> ")) for arrow in arrows]
    return sorted(bad)


def two_way(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Pairs of folders (or root modules) that import each other, each pair once, in name order."""
    pairs = folder_edges(edges)
    return sorted((a, b) for a, b in pairs if a < b and (b, a) in pairs)


def main(argv: list[str]) -> int:
    edges = graph()
    if "--edges" in argv:
        for source, targets in sorted(edges.items()):
            for target in sorted(targets):
                print(f"{source} -> {target}")
        return 0
    found = cycles(edges)
    bad = forbidden(edges)
    up = upward(edges)
    ties = two_way(edges)
    pairs = folder_edges(edges)
    for component in found:
        print("cycle:", " <-> ".join(component))
    for source, target in bad:
        print(f"forbidden: {source} -> {target}")
    for source, target in up:
        print(f"runs back up: {source} -> {target}")
    for a, b in ties:
        print(f"two-way: {a} <-> {b}: {'; '.join(pairs[(a, b)][:3])} / {'; '.join(pairs[(b, a)][:3])}")
    if not (found or bad or up or ties):
        print(f"{len(edges)} modules, no cycles, no forbidden arrows, no arrow back up, no two-way folder tie")
    return 1 if found or bad or up or ties else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
