"""Layers, one direction: which folder may import which.

The folders, bottom to top (`LAYERS` in tests/import_graph.py maps each to its layer):
the history (harness/history); the checkers (checkers/); the lab (harness/lab: services,
the setup contract, workload, nemesis, the scenario vocabulary, the lifecycle and the
run, replay and explore engines); the architectures and the pipeline
(scenarios/architectures, scenarios/pipeline); the catalogue (scenarios/catalogue); the
application (harness/app, reports/); the CLI and the pytest plugin (harness/cli,
harness/pytest_plugin.py); the `driftlab` facade. Every import counts, those inside
functions and those under `if TYPE_CHECKING:` included.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx
from import_graph import LAYERS, ROOT, folder_graph, graph, imports, layer_of, modules

ARCHITECTURES = ["driftlab", "scenarios", "architectures"]


def test_every_module_is_in_a_mapped_folder() -> None:
    unplaced = []
    known = modules()
    for module in known:
        try:
            layer_of(module, known)
        except LookupError:
            unplaced.append(module)
    assert unplaced == []


def test_no_import_points_up_a_layer() -> None:
    known = modules()
    edges = graph()

    def layer(module: str) -> str:
        return LAYERS[layer_of(module, known)][0]

    upward = sorted(
        f"{source} ({layer(source)}) imports {target} ({layer(target)})"
        for source, target in edges.edges
        if layer_of(target, known) > layer_of(source, known)
    )
    assert upward == []


def test_no_import_circle() -> None:
    circles = [sorted(c) for c in nx.strongly_connected_components(graph()) if len(c) > 1]
    assert circles == []


def test_no_circle_between_folders() -> None:
    folders = folder_graph(graph(), modules())
    assert [sorted(c) for c in nx.strongly_connected_components(folders) if len(c) > 1] == []


def test_an_import_under_type_checking_counts(tmp_path: Path) -> None:
    module = tmp_path / "typed.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from driftlab.harness.cli.app import app\n"
    )
    assert imports(module, modules()) == {"driftlab.harness.cli.app"}


def test_the_history_imports_only_itself() -> None:
    known = modules()
    found = {
        f"{name}: {target}"
        for name, path in known.items()
        if name.startswith("driftlab.harness.history")
        for target in imports(path, known)
        if not target.startswith("driftlab.harness.history")
    }
    assert found == set()


def test_an_architecture_imports_another_only_where_it_builds_on_it() -> None:
    # The CDC variants hold cdc's public parts (wiring, capture, pipeline, client); the
    # bounded log holds the direct producer's AckedLog; outbox's C14 is C2 in one
    # transaction, so its scenario takes C2's workload and crash point from
    # dual_write.scenarios. Anything else shared belongs in harness/lab/setups/.
    builds_on = {
        "outbox": {"cdc", "dual_write"},
        "snapshot": {"cdc"},
        "compacted_log": {"cdc"},
        "bounded_log": {"direct_producer"},
    }
    known = modules()
    found = set()
    for name, path in known.items():
        parts = name.split(".")
        if parts[:3] != ARCHITECTURES or len(parts) < 5:
            continue
        for target in imports(path, known):
            other = target.split(".")
            if other[:3] != ARCHITECTURES or len(other) < 4:
                continue
            if other[3] not in {parts[3], *builds_on.get(parts[3], ())}:
                found.add(f"{path.relative_to(ROOT)}: {target}")
    assert found == set()
