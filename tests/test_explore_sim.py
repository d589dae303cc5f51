"""The driftlab simulator: deterministic, sane histories, each setup's mechanics."""

from __future__ import annotations

import tempfile
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftlab.checkers.anomaly import KINDS, Anomaly
from driftlab.harness.history.reader import read_history
from driftlab.harness.history.schema import COLUMNS, SOURCE_STORE, Event
from driftlab.harness.lab.explore.properties import (
    PROPERTIES,
    available_checkers,
    reference_anomalies,
)
from driftlab.harness.lab.explore.schedule import Step
from driftlab.harness.lab.explore.sim.recorder import to_jsonl
from driftlab.harness.lab.explore.sim.tally import Finding
from driftlab.harness.lab.explore.spec import SetupSpec
from driftlab.harness.lab.explore.strategies import schedules
from driftlab.scenarios.catalogue.architectures import SIMULATED_SETUPS

SETUP_NAMES = sorted(SIMULATED_SETUPS)


def any_setup_and_schedule() -> st.SearchStrategy[tuple[SetupSpec, list[Step]]]:
    return st.sampled_from(SETUP_NAMES).flatmap(
        lambda name: st.tuples(st.just(SIMULATED_SETUPS[name]), schedules(SIMULATED_SETUPS[name]))
    )


@settings(max_examples=60, deadline=None)
@given(any_setup_and_schedule())
def test_same_schedule_gives_identical_history(case: tuple[SetupSpec, list[Step]]) -> None:
    spec, steps = case
    first, second = spec.run(steps), spec.run(list(steps))
    assert first.events == second.events
    assert first.executed == second.executed
    assert first.findings == second.findings


@settings(max_examples=80, deadline=None)
@given(any_setup_and_schedule())
def test_history_is_sane(case: tuple[SetupSpec, list[Step]]) -> None:
    spec, steps = case
    events = spec.run(steps).events
    assert events[0].type == "header" and events[-1].kind == "end"
    times = [e.time for e in events]
    assert times == sorted(set(times)), "times strictly increase"
    assert all(set(e.to_dict()) <= set(COLUMNS) for e in events)
    # Versions increase per key at the source, in commit order.
    versions: dict[str, list[int]] = defaultdict(list)
    for e in events:
        if e.type == "op" and e.store == SOURCE_STORE and e.phase == "ok":
            versions[e.key].append(e.version)
    for vs in versions.values():
        assert vs == list(range(1, len(vs) + 1))
    # Offsets per partition are dense: produced at 0, 1, 2, ... with no gap.
    offsets: dict[tuple[str, int], list[int]] = defaultdict(list)
    for e in events:
        if e.type == "msg" and e.action == "produce" and e.offset is not None:
            offsets[(e.channel, e.partition)].append(e.offset)
    for offs in offsets.values():
        assert offs == list(range(len(offs)))
    # Every process delivers a partition's offsets in increasing order.
    last: dict[tuple[str, str, int], int] = {}
    for e in events:
        if e.type == "msg" and e.action == "deliver" and e.offset is not None:
            group = (e.process, e.channel, e.partition)
            assert e.offset > last.get(group, -1)
            last[group] = e.offset
    # The executed schedule is a fixed point: each of its steps is enabled on replay.
    executed = spec.run(steps).executed
    assert spec.run(executed[:-1]).executed == executed


def _matches(f: Finding, a: Anomaly) -> bool:
    kind, store, key, consumer = f
    return (
        a.kind == kind
        and (store is None or a.store == store)
        and (key is None or a.key == key)
        and (consumer is None or a.consumer == consumer)
    )


TALLIED = frozenset(
    {
        "lost-write",
        "lost-message",
        "duplicate-delivery",
        "duplicate-apply",
        "reorder-delivery",
        "stale-overwrite",
        "missing",
        "extra",
        "stale",
        "phantom",
        "invariant-violation",
    }
)


@settings(max_examples=200, deadline=None)
@given(any_setup_and_schedule())
def test_tally_agrees_with_reference_checkers(case: tuple[SetupSpec, list[Step]]) -> None:
    """The search loop's cheap tally finds what the reference checkers find.

    Compared for the kinds of every reference checker present in checkers/reference.
    """
    spec, steps = case
    run = spec.run(steps)
    present = available_checkers()
    kinds = {k for name in present for k in KINDS[name]} & TALLIED
    anomalies = [a for a in reference_anomalies(run.events)[0] if a.kind in kinds]
    findings = {f for f in run.findings if f[0] in kinds}
    for f in findings:
        assert any(_matches(f, a) for a in anomalies), f"tally only: {f}"
    for a in anomalies:
        assert any(_matches(f, a) for f in findings), f"reference only: {a.kind} {a.detail}"


def test_reference_checkers_for_the_properties_are_present() -> None:
    """Every checker whose kinds a property names must be there to confirm it."""
    named = {k for p in PROPERTIES for k in p.kinds}
    needed = {checker for checker, kinds in KINDS.items() if named & set(kinds)}
    assert needed == {"lost", "duplicates", "reorder", "divergence", "eventsourcing"}
    assert needed <= set(available_checkers())


def _state(events: list[Event], store: str) -> dict[str, str]:
    return {e.key: e.value for e in events if e.type == "state" and e.store == store and e.key}


def test_figure_11_4_race_leaves_the_cache_on_the_older_value() -> None:
    race = [
        Step("db-write", "c1", "k1"),
        Step("db-write", "c2", "k1"),
        Step("cache-write", "c2"),
        Step("cache-write", "c1"),
    ]
    run = SIMULATED_SETUPS["dual-write"].run(race)
    assert _state(run.events, "source") == {"k1": "c2-1"}
    assert _state(run.events, "cache") == {"k1": "c1-1"}
    assert ("stale", "cache", "k1", None) in run.findings


def test_dual_write_quiesce_completes_operations_in_flight() -> None:
    run = SIMULATED_SETUPS["dual-write"].run([Step("db-write", "c1", "k1")])
    assert [s.action for s in run.executed] == ["db-write", "cache-write", "quiesce"]
    assert _state(run.events, "cache") == {"k1": "c1-1"}
    assert not run.findings


def test_disabled_steps_are_skipped() -> None:
    run = SIMULATED_SETUPS["cdc"].run(
        [Step("apply", "g"), Step("commit", "g"), Step("restart", "g"), Step("heal")]
    )
    assert [s.action for s in run.executed] == ["quiesce"]


def _applied_then_crash(partition: int) -> list[Step]:
    """c1 writes k1 (captured into `partition`); g receives and applies it, then crashes
    before it commits."""
    return [
        Step("db-write", "c1", "k1"),
        Step("poll", "g", partition=partition),
        Step("apply", "g"),
        Step("crash", "g"),
    ]


def test_cdc_crash_redelivers_and_the_idempotent_consumer_skips() -> None:
    run = SIMULATED_SETUPS["cdc"].run(_applied_then_crash(partition=1))
    delivers = [e for e in run.events if e.action == "deliver"]
    assert [(e.process, e.attempt) for e in delivers] == [("g#1", 1), ("g#2", 2)]
    assert [e.action for e in run.events if e.action in ("apply", "skip")] == ["apply", "skip"]
    assert _state(run.events, "cache") == _state(run.events, "source")
    assert {f[0] for f in run.findings} == {"duplicate-delivery"}


def test_counter_consumer_counts_a_redelivered_message_twice() -> None:
    run = SIMULATED_SETUPS["cdc-counter"].run(_applied_then_crash(partition=0))
    assert _state(run.events, "source") == {"k1": "1"}
    assert _state(run.events, "counter") == {"k1": "2"}


def test_partitioned_link_blocks_apply_until_heal() -> None:
    steps = [
        Step("db-write", "c1", "k1"),
        Step("poll", "g", partition=1),
        Step("partition", target="g->cache"),
        Step("apply", "g"),
        Step("heal"),
        Step("apply", "g"),
    ]
    run = SIMULATED_SETUPS["cdc"].run(steps)
    assert [s.action for s in run.executed][2:] == ["partition", "heal", "apply", "quiesce"]
    faults = [(e.phase, e.kind, e.target) for e in run.events if e.type == "fault"]
    assert faults == [("start", "partition", "g->cache"), ("stop", "partition", "g->cache")]


def test_bounded_log_drops_the_oldest_for_the_slow_consumer_only() -> None:
    run = SIMULATED_SETUPS["bounded-log"].run([Step("db-write", "c1", "k1")] * 4)
    got = defaultdict(list)
    for e in run.events:
        if e.action == "deliver":
            got[e.consumer].append(e.offset)
    assert got == {"fast": [0, 1, 2, 3], "slow": [1, 2, 3]}
    assert run.findings == {("lost-message", None, None, "slow")}


def test_amqp_crash_requeues_at_the_front() -> None:
    steps = [
        Step("db-write", "c1", "k1"),
        Step("db-write", "c1", "k1"),
        Step("poll", "w1"),
        Step("poll", "w2"),
        Step("crash", "w1"),
    ]
    run = SIMULATED_SETUPS["amqp"].run(steps)
    delivered = [(e.process, e.version, e.attempt) for e in run.events if e.action == "deliver"]
    assert delivered == [("w1#1", 1, 1), ("w2#1", 2, 1), ("w2#1", 1, 2)]
    assert ("reorder-delivery", None, "k1", "workers") in run.findings


@pytest.mark.parametrize(
    ("setup", "violates"), [("event-sourced", True), ("event-sourced-checked", False)]
)
def test_expected_version_check_prevents_the_overdraft(setup: str, violates: bool) -> None:
    steps = [
        Step("deposit", "c1", "a1"),
        Step("validate", "c1", "a1"),
        Step("validate", "c2", "a1"),
        Step("append", "c1"),
        Step("append", "c2"),
    ]
    run = SIMULATED_SETUPS[setup].run(steps)
    assert _state(run.events, "projection:balance") == {"a1": "-1" if violates else "0"}
    assert (("invariant-violation", None, "a1", None) in run.findings) is violates
    fails = [e.error for e in run.events if e.type == "op" and e.phase == "fail"]
    assert fails == ([] if violates else ["expected version 1, found 2"])


def test_compaction_keeps_the_latest_record_of_each_key_for_a_rebuild() -> None:
    steps = [
        Step("db-write", "c1", "k1"),
        Step("db-write", "c1", "k2"),
        Step("db-write", "c2", "k1"),
        Step("compact"),
        Step("compact"),
        Step("db-write", "c2", "k2"),
    ]
    run = SIMULATED_SETUPS["compacted-log"].run(steps)
    assert [s.action for s in run.executed] == [
        *(["db-write"] * 3),
        "compact",
        "db-write",
        "quiesce",
    ]
    rebuilt = [(e.offset, e.key) for e in run.events if e.action == "deliver"]
    assert rebuilt == [(1, "k2"), (2, "k1"), (3, "k2")]
    assert _state(run.events, "rebuild") == _state(run.events, "source")
    # The compacted-away record never reached the rebuilt store: lost for it, by definition.
    assert ("lost-write", "rebuild", "k1", None) in run.findings


@settings(max_examples=10, deadline=None)
@given(any_setup_and_schedule())
def test_simulated_history_reads_as_a_run_segment(case: tuple[SetupSpec, list[Step]]) -> None:
    spec, steps = case
    events = spec.run(steps).events
    with tempfile.TemporaryDirectory() as tmp:
        segment = Path(tmp) / "sim.jsonl"
        segment.write_text(to_jsonl(events))
        history = read_history(segment)
    assert history.info.complete and not history.info.warnings
    assert (
        history.info.header is not None and history.info.header.scenario == f"explore:{spec.name}"
    )
    assert history.table.num_rows == len(events)
    assert history.table.column("seq").to_pylist() == list(range(len(events)))


def test_tombstones_keep_a_redelivered_older_write_from_resurrecting_a_key() -> None:
    steps = [
        Step("db-write", "c1", "k1"),
        Step("db-delete", "c1", "k1"),
        Step("poll", "g", partition=1),
        Step("poll", "g", partition=1),
        Step("apply", "g"),
        Step("apply", "g"),
        Step("crash", "g"),
    ]
    run = SIMULATED_SETUPS["cdc"].run(steps)
    # After the restart both messages come again: the write is skipped, not re-applied.
    redone = [(e.action, e.value) for e in run.events if e.action in ("apply", "skip")][2:]
    assert redone == [("skip", "c1-1"), ("skip", None)]
    assert _state(run.events, "cache") == _state(run.events, "source") == {}
    assert {f[0] for f in run.findings} == {"duplicate-delivery"}


def test_compacted_tombstone_deletes_the_key_from_the_rebuild() -> None:
    steps = [
        Step("db-write", "c1", "k1"),
        Step("db-write", "c1", "k2"),
        Step("db-delete", "c2", "k1"),
        Step("compact"),
        Step("db-delete", "c2", "k1"),  # absent: not enabled
    ]
    run = SIMULATED_SETUPS["compacted-log"].run(steps)
    assert [s.action for s in run.executed] == [
        "db-write",
        "db-write",
        "db-delete",
        "compact",
        "quiesce",
    ]
    rebuilt = [(e.offset, e.key, e.value) for e in run.events if e.action == "deliver"]
    assert rebuilt == [(1, "k2", "c1-2"), (2, "k1", None)]
    assert _state(run.events, "rebuild") == _state(run.events, "source") == {"k2": "c1-2"}
