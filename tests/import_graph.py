"""driftlab's own import graph, read from the source: every import of every module,
those inside functions included, those under `if TYPE_CHECKING:` left out (they never
run). `python tests/import_graph.py` prints its figures: levels, imports that point up
a layer, circles."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "checkers", "reports", "scenarios")

# The layer order, bottom to top. A module belongs to the layer of the longest entry
# that names it or a package above it ("harness" alone is the package's `__init__`, which
# holds only the version); it may import its own layer or one below, never one above.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "history",
        (
            "harness",
            "harness.exitcodes",
            "harness.history",
            "harness.logfile",
            "harness.rundir",
            "harness.uninterrupted",
            "harness.waiting",
        ),
    ),
    ("checkers", ("checkers", "harness.importers", "harness.testing.synthetic")),
    (
        "lab toolkit",
        (
            "harness.services",
            "harness.setups",
            "harness.workload",
            "harness.nemesis",
            "scenarios.model",
            "harness.runner",
            "harness.replay",
            "harness.explore",
            "harness.testing",
        ),
    ),
    ("architectures", ("harness.architectures", "harness.pipeline")),
    ("scenario catalogue", ("scenarios",)),
    ("application", ("harness.app", "reports")),
    ("CLI and pytest plugin", ("harness.cli", "harness.pytest_plugin")),
)


def module_name(path: Path) -> str:
    """`harness/runner/runner.py` -> `harness.runner.runner`; a package is its folder."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of driftlab's packages, by name."""
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for orelse in child.orelse:
                yield from _import_nodes(orelse)
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        yield from _import_nodes(child)


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The driftlab modules `path` imports anywhere in its body (nested ones too), but
    not under `TYPE_CHECKING`; `from a import b` names module `a.b` when it is one."""
    found: set[str] = set()
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in _import_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                prefix = package[: len(package) - node.level + 1]
                base = ".".join([*prefix, base] if base else prefix)
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        for name in names:
            # `import a.b.c` loads a.b.c; the nearest known module stands for it.
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def layer_of(module: str) -> int:
    """The index in LAYERS of the longest entry that names `module`."""
    best, best_len = -1, -1
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            names = module == entry or (entry != "harness" and module.startswith(entry + "."))
            if names and len(entry) > best_len:
                best, best_len = index, len(entry)
    if best < 0:
        raise LookupError(f"{module} is in no layer of LAYERS in tests/import_graph.py")
    return best


def graph() -> nx.DiGraph:
    """Module -> module for every import between driftlab's own modules. A package's
    `__init__` is loaded by importing any of its modules, but it is not an edge here:
    its own imports are its own edges."""
    known = modules()
    edges = nx.DiGraph()
    edges.add_nodes_from(known)
    for name, path in known.items():
        for target in imports(path, known):
            if target != name:
                edges.add_edge(name, target)
    return edges


@dataclass(frozen=True)
class Figures:
    """What the import graph looks like from above."""

    modules: int
    imports: int
    levels: int
    upward: list[str]
    circles: list[list[str]]


def figures() -> Figures:
    """The graph's figures: levels (the longest chain of imports, a circle counted as
    one level), the imports that point up a layer and the circles."""
    edges = graph()
    circles = [sorted(c) for c in nx.strongly_connected_components(edges) if len(c) > 1]
    condensed = nx.condensation(edges)
    upward = sorted(
        f"{source} -> {target}"
        for source, target in edges.edges
        if layer_of(target) > layer_of(source)
    )
    return Figures(
        modules=edges.number_of_nodes(),
        imports=edges.number_of_edges(),
        levels=nx.dag_longest_path_length(condensed) + 1,
        upward=upward,
        circles=sorted(circles, key=len, reverse=True),
    )


def main() -> None:
    """Print the figures."""
    found = figures()
    print(f"modules {found.modules}, imports {found.imports}, levels {found.levels}")
    print(f"imports that point up a layer: {len(found.upward)}")
    for line in found.upward:
        print(f"  {line}")
    print(f"circles: {len(found.circles)}")
    for circle in found.circles:
        print(f"  ({len(circle)}) {', '.join(circle)}")


if __name__ == "__main__":
    sys.exit(main())
