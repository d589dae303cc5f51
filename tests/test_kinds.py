"""Every anomaly kind is spelled once (driftlab.checkers.kinds.TABLE) and has every part it needs:
a kind that lacks one fails here, so no check can silently not run in the keyed pass."""

from __future__ import annotations

from driftlab.checkers import kinds
from driftlab.checkers.anomaly import ALL_KINDS, KINDS
from driftlab.checkers.coverage import CHANCES
from driftlab.checkers.keyed import coverage as keyed_coverage
from driftlab.checkers.keyed import step
from driftlab.checkers.keyed.sieve import SIEVE_QUERIES
from driftlab.checkers.kinds import (
    BY_NAME,
    KEY,
    LOST_WRITE,
    MESSAGE,
    MISSING,
    PARTITION,
    STALE_OVERWRITE,
    TABLE,
)
from driftlab.checkers.reference import CHECKERS
from driftlab.checkers.verdict import untested_line
from driftlab.harness.lab.explore import properties
from driftlab.harness.lab.importers.jepsen import FORBIDDEN, JEPSEN_NAMES, REBALANCE_ALLOWED
from driftlab.harness.lab.scenario import CONVERGES
from driftlab.reports.sequence import DIAGRAM_KINDS
from driftlab.scenarios.pipeline import spec_expect

ROUTES = {KEY: step.KEY, PARTITION: step.PARTITION, MESSAGE: step.MESSAGE}


def test_each_kind_is_in_the_table_once() -> None:
    names = [k.name for k in TABLE]
    assert len(names) == len(set(names))
    assert tuple(names) == ALL_KINDS
    assert {k for kinds in KINDS.values() for k in kinds} == set(BY_NAME)


def test_each_kind_has_a_checker_run_on_its_group_in_the_keyed_pass() -> None:
    for kind in TABLE:
        assert kind.checker in CHECKERS, kind.name
        assert kind.group in ROUTES, kind.name
        checks = {checker for checker, _ in step.CHECKS[ROUTES[kind.group]]}
        assert kind.checker in checks, f"{kind.name}: {kind.checker} never runs on its group"


def test_each_kind_has_a_sieve_query() -> None:
    for kind in TABLE:
        assert SIEVE_QUERIES.get(kind.sieve), f"{kind.name}: no sieve query {kind.sieve!r}"


def test_each_kind_has_its_chances_defined_in_words_python_and_the_keyed_pass() -> None:
    for kind in TABLE:
        assert kind.chance.strip(), kind.name
        name = kind.counted_as
        assert name in CHANCES, f"{kind.name}: no chance {name!r} in driftlab.checkers.coverage"
        assert name in keyed_coverage.QUERIES, f"{kind.name}: no chance query {name!r} in the pass"


def test_each_chance_definition_counts_some_kind_and_those_sharing_one_share_its_words() -> None:
    counted = {k.counted_as for k in TABLE}
    assert set(CHANCES) == counted == set(keyed_coverage.QUERIES)
    for name in counted:
        sharing = [k for k in TABLE if k.counted_as == name]
        assert len({(k.chance, k.group) for k in sharing}) == 1, name
    assert BY_NAME[MISSING].counted_as == "divergence"
    assert BY_NAME[LOST_WRITE].counted_as == LOST_WRITE


def test_a_planted_value_is_only_for_a_kind_judged_from_final_states() -> None:
    for kind in TABLE:
        assert kind.planted is None or kind.final_state, kind.name


def test_each_kind_has_a_label_and_its_implied_kinds_are_kinds() -> None:
    for kind in TABLE:
        assert kind.label.strip(), kind.name
        assert set(kind.implies) <= set(BY_NAME) - {kind.name}, kind.name


def test_jepsen_names_come_from_the_table() -> None:
    assert set(FORBIDDEN) <= {k.name for k in TABLE if k.jepsen}
    for kind in TABLE:
        assert JEPSEN_NAMES.get(kind.name) == kind.jepsen


def test_each_kind_name_is_a_constant_of_the_table_module() -> None:
    public = {n: v for n, v in vars(kinds).items() if n.isupper() and not n.startswith("_")}
    constants = {v for v in public.values() if isinstance(v, str)} - {KEY, PARTITION, MESSAGE}
    assert constants == set(BY_NAME)


def test_a_chance_is_a_noun_phrase_and_its_unit_a_tuple() -> None:
    """The verdict says "it holds no <chance>": no article, no unit inside it."""
    for kind in TABLE:
        assert kind.chance_item.split(" ", 1)[0] not in ("a", "an"), kind.name
        assert "one per" not in kind.chance_item, kind.name
        assert kind.per == "" or (kind.per.startswith("(") and kind.per.endswith(")"))
    assert untested_line(LOST_WRITE).startswith(
        "lost-write had no chance in this history: it holds no acknowledged source write"
    )


def test_the_kinds_of_one_checker_share_a_report_class() -> None:
    for checker, names in KINDS.items():
        assert len({BY_NAME[n].report_class for n in names}) == 1, checker


def test_the_diagram_ranks_are_distinct_and_final_states_are_drawn_first() -> None:
    ranked = [k for k in TABLE if k.diagram is not None]
    assert len({k.diagram for k in ranked}) == len(ranked)
    finals = [n for n in DIAGRAM_KINDS if BY_NAME[n].final_state]
    assert DIAGRAM_KINDS[: len(finals)] == tuple(finals)
    assert BY_NAME[DIAGRAM_KINDS[0]].diagram == min(BY_NAME[n].diagram or 0 for n in finals)


def test_the_lists_of_other_layers_are_columns_of_the_table() -> None:
    """A kind's properties are read from its row, never listed again elsewhere."""
    assert set(CONVERGES) == {k.name for k in TABLE if k.breaks_convergence}
    assert set(properties.DIVERGENCE) == {k.name for k in TABLE if k.final_state}
    assert set(spec_expect.VERSIONED_KINDS) == {k.name for k in TABLE if k.store_versions}
    broker = {k.name for k in TABLE if k.from_broker}
    assert set(spec_expect._UNSEEN_FROM_OUTSIDE) == broker
    assert set(REBALANCE_ALLOWED) <= set(FORBIDDEN)


def test_kinds_names_selects_by_column_in_table_order() -> None:
    for checker, of_checker in KINDS.items():
        assert kinds.names(checker=checker) == of_checker
    both = kinds.names(final_state=True, breaks_convergence=True)
    assert set(both) == set(kinds.names(final_state=True)) & set(CONVERGES)
    assert STALE_OVERWRITE in kinds.names(store_versions=True)
