"""Which package may import which: the history is a leaf library, and the runtime does
not load the report renderer."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _imports(path: Path, *, nested: bool) -> Iterator[str]:
    """The modules `path` imports (at module level only, unless `nested`)."""
    tree = ast.parse(path.read_text())
    nodes = ast.walk(tree) if nested else iter(tree.body)
    for node in nodes:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module


def test_the_history_imports_only_itself_and_the_exit_codes() -> None:
    found = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in (ROOT / "harness" / "history").rglob("*.py")
        for module in _imports(path, nested=True)
        if module.split(".")[0] in ("harness", "checkers", "reports", "scenarios")
        and not module.startswith("harness.history")
        and module != "harness.exitcodes"
    }
    assert found == set()


def test_the_runtime_does_not_load_the_reports() -> None:
    runtime = [
        path
        for path in (ROOT / "harness").rglob("*.py")
        if (ROOT / "harness" / "cli") not in path.parents
    ]
    found = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in runtime
        for module in _imports(path, nested=False)
        if module.split(".")[0] == "reports"
    }
    assert found == set()


def test_the_shared_setup_plumbing_imports_no_architecture() -> None:
    found = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in (ROOT / "harness" / "setups").rglob("*.py")
        for module in _imports(path, nested=True)
        if module.startswith("harness.architectures")
    }
    assert found == set()


def test_an_architecture_imports_another_only_where_it_builds_on_it() -> None:
    # The CDC variants hold cdc's public parts (wiring, capture, pipeline, client); the
    # bounded log holds the direct producer's AckedLog; outbox's C14 is C2 in one
    # transaction, so its scenario takes C2's workload and crash point from
    # dual_write.scenarios. Anything else shared belongs in harness/setups/.
    builds_on = {
        "outbox": {"cdc", "dual_write"},
        "snapshot": {"cdc"},
        "compacted_log": {"cdc"},
        "bounded_log": {"direct_producer"},
    }
    root = ROOT / "harness" / "architectures"
    found = set()
    for package in (p for p in root.iterdir() if p.is_dir() and p.name != "__pycache__"):
        for path in package.rglob("*.py"):
            for module in _imports(path, nested=True):
                parts = module.split(".")
                if parts[:2] != ["harness", "architectures"] or len(parts) < 3:
                    continue
                other = parts[2]
                if other != package.name and other not in builds_on.get(package.name, set()):
                    found.add(f"{path.relative_to(ROOT)}: {module}")
    assert found == set()
