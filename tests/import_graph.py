"""driftlab's own import graph, read from the source: every import of every module,
those inside functions and those under `if TYPE_CHECKING:` included (a type-only import
still ties the two modules together). `python tests/import_graph.py` prints its figures:
folders, levels, imports that point up a layer, circles."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
# Each folder of the repository that is installed, and its import name.
PACKAGES = {
    "driftlab": "driftlab",
    "harness": "driftlab.harness",
    "checkers": "driftlab.checkers",
    "reports": "driftlab.reports",
    "scenarios": "driftlab.scenarios",
}

# The folder map: the layers bottom to top, each the folders (or single modules) that
# hold it. A module belongs to the layer of the longest entry holding its file; it may
# import its own layer or one below, never one above. A package's `__init__` above the
# layer folders holds only a docstring (and `harness/`'s the version): it sits with the
# lowest layer under it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("history", ("harness/__init__.py", "harness/history")),
    ("checkers", ("checkers",)),
    ("lab", ("harness/lab",)),
    (
        "architectures and pipeline",
        ("scenarios/__init__.py", "scenarios/architectures", "scenarios/pipeline"),
    ),
    ("catalogue", ("scenarios/catalogue",)),
    ("application", ("harness/app", "reports")),
    ("CLI and pytest plugin", ("harness/cli", "harness/pytest_plugin.py")),
    ("facade", ("driftlab",)),
)


def module_name(path: Path) -> str:
    """`harness/lab/runner/runner.py` -> `driftlab.harness.lab.runner.runner`; a package
    is its folder."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    parts = (*PACKAGES[parts[0]].split("."), *parts[1:])
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of driftlab's packages, by name."""
    return {
        module_name(path): path
        for folder in PACKAGES
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def _import_nodes(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        yield from _import_nodes(child)


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The driftlab modules `path` imports anywhere in its body (nested ones and those
    under `TYPE_CHECKING` too); `from a import b` names module `a.b` when it is one."""
    found: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                package = module_name(path).split(".")
                if path.name != "__init__.py":
                    package = package[:-1]
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


def layer_of(module: str, known: dict[str, Path] | None = None) -> int:
    """The index in LAYERS of the longest entry that holds `module`'s file."""
    path = (known or modules())[module].relative_to(ROOT).as_posix()
    best, best_len = -1, -1
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            if (path == entry or path.startswith(entry + "/")) and len(entry) > best_len:
                best, best_len = index, len(entry)
    if best < 0:
        raise LookupError(f"{path} is in no folder of LAYERS in tests/import_graph.py")
    return best


def folder_of(module: str, known: dict[str, Path]) -> str:
    """The LAYERS entry that holds `module`."""
    path = known[module].relative_to(ROOT).as_posix()
    entries = [e for _, es in LAYERS for e in es if path == e or path.startswith(e + "/")]
    return max(entries, key=len)


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
    folders: int
    folder_imports: int
    folder_levels: int
    folder_circles: list[list[str]]


def folder_graph(edges: nx.DiGraph, known: dict[str, Path]) -> nx.DiGraph:
    """The graph drawn by folder: LAYERS entry -> LAYERS entry for every import between
    modules of two different entries."""
    folders = nx.DiGraph()
    folders.add_nodes_from(entry for _, entries in LAYERS for entry in entries)
    for source, target in edges.edges:
        a, b = folder_of(source, known), folder_of(target, known)
        if a != b:
            folders.add_edge(a, b)
    return folders


def _levels(edges: nx.DiGraph) -> int:
    return nx.dag_longest_path_length(nx.condensation(edges)) + 1


def figures() -> Figures:
    """The graph's figures, by module and by folder: levels (the longest chain of
    imports, a circle counted as one level), the imports that point up a layer and the
    circles."""
    known = modules()
    edges = graph()
    circles = [sorted(c) for c in nx.strongly_connected_components(edges) if len(c) > 1]
    upward = sorted(
        f"{source} -> {target}"
        for source, target in edges.edges
        if layer_of(target, known) > layer_of(source, known)
    )
    folders = folder_graph(edges, known)
    folder_circles = [sorted(c) for c in nx.strongly_connected_components(folders) if len(c) > 1]
    return Figures(
        modules=edges.number_of_nodes(),
        imports=edges.number_of_edges(),
        levels=_levels(edges),
        upward=upward,
        circles=sorted(circles, key=len, reverse=True),
        folders=folders.number_of_nodes(),
        folder_imports=folders.number_of_edges(),
        folder_levels=_levels(folders),
        folder_circles=folder_circles,
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
    print(
        f"by folder: folders {found.folders}, imports {found.folder_imports}, "
        f"levels {found.folder_levels}, circles {len(found.folder_circles)}"
    )
    for circle in found.folder_circles:
        print(f"  ({len(circle)}) {', '.join(circle)}")


if __name__ == "__main__":
    sys.exit(main())
