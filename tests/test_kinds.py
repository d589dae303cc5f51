"""Every anomaly kind is spelled once (checkers.kinds.TABLE) and has every part it needs:
a kind that lacks one fails here, so no check can silently not run in the keyed pass."""

from __future__ import annotations

from checkers.anomaly import ALL_KINDS, KINDS
from checkers.coverage import CHANCES
from checkers.keyed import coverage as keyed_coverage
from checkers.keyed import step
from checkers.keyed.sieve import SIEVE_QUERIES
from checkers.kinds import BY_NAME, KEY, MESSAGE, PARTITION, TABLE
from checkers.reference import CHECKERS
from harness.importers.jepsen import FORBIDDEN, JEPSEN_NAMES

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
        assert kind.name in CHANCES, f"{kind.name}: no chance in checkers.coverage"
        query = keyed_coverage.OF_KIND.get(kind.name, kind.name)
        assert query in keyed_coverage.QUERIES, f"{kind.name}: no chance query in the pass"


def test_each_kind_has_a_label_and_its_implied_kinds_are_kinds() -> None:
    for kind in TABLE:
        assert kind.label.strip(), kind.name
        assert set(kind.implies) <= set(BY_NAME) - {kind.name}, kind.name


def test_jepsen_names_come_from_the_table() -> None:
    assert set(FORBIDDEN) <= {k.name for k in TABLE if k.jepsen}
    for kind in TABLE:
        assert JEPSEN_NAMES.get(kind.name) == kind.jepsen
