"""Layers, one direction: which module may import which.

The order, bottom to top (`LAYERS` in tests/import_graph.py names the modules of each):
the history; the checkers; the lab toolkit (services, the setup contract, workload,
nemesis, the scenario model, the lifecycle and the run, replay and explore engines); the
architectures; the scenario catalogue; the application (run, suite, matrix, replay and
explore orchestration, the analyse-judge-report sequence, the report renderer); the CLI
and the pytest plugin. Every import counts, those inside functions included; only those
under `if TYPE_CHECKING:` (which never run) may point up or close a circle.
"""

from __future__ import annotations

import networkx as nx
from import_graph import LAYERS, ROOT, graph, imports, layer_of, modules


def test_every_module_is_in_a_layer() -> None:
    unplaced = []
    for module in modules():
        try:
            layer_of(module)
        except LookupError:
            unplaced.append(module)
    assert unplaced == []


def test_no_import_points_up_a_layer() -> None:
    edges = graph()
    upward = sorted(
        f"{source} ({LAYERS[layer_of(source)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for source, target in edges.edges
        if layer_of(target) > layer_of(source)
    )
    assert upward == []


def test_no_import_circle() -> None:
    circles = [sorted(c) for c in nx.strongly_connected_components(graph()) if len(c) > 1]
    assert circles == []


def test_the_history_imports_only_itself_and_the_exit_codes() -> None:
    known = modules()
    found = {
        f"{name}: {target}"
        for name, path in known.items()
        if name.startswith("driftlab.harness.history")
        for target in imports(path, known)
        if not target.startswith("driftlab.harness.history")
        and target != "driftlab.harness.history.exitcodes"
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
        if parts[:2] != ["harness", "architectures"] or len(parts) < 4:
            continue
        for target in imports(path, known):
            other = target.split(".")
            if other[:2] != ["harness", "architectures"] or len(other) < 3:
                continue
            if other[2] not in {parts[2], *builds_on.get(parts[2], ())}:
                found.add(f"{path.relative_to(ROOT)}: {target}")
    assert found == set()
