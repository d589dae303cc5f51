"""The CDC setup on the real stack: PostgreSQL -> Debezium -> Kafka -> consumer process
-> Redis, with the consumer SIGKILLed and restarted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from setup_fixtures import events, make_context, running, write_then_delete

from driftlab.harness.history.schema import LOG_AUDIT, SOURCE_STORE
from driftlab.harness.lab.services.stack import Stack
from driftlab.harness.lab.setups.base import SetupContext
from driftlab.scenarios.architectures.cdc.setup import Cdc


def test_bad_parameters_are_named(stack: Stack, tmp_path: Path) -> None:
    for params, problem in (
        ({"effect": "sometimes"}, "effect 'sometimes'; use versioned or counter"),
        ({"commit": "never"}, "commit 'never'; use after-apply or before-apply"),
        ({"partitions": 2, "consumers": 3}, "between 1 and that many consumers"),
    ):
        with pytest.raises(ValueError, match=problem):
            Cdc().prepare(make_context(stack, tmp_path, "cdc-bad", **params))


@pytest.fixture(scope="module")
def wired(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cdc, SetupContext]]:
    setup = Cdc()
    tmp_path = tmp_path_factory.mktemp("cdc")
    with running(setup, stack, tmp_path, "cdc-test", partitions=2, consumers=1) as ctx:
        yield setup, ctx


@pytest.mark.services
def test_changes_reach_the_cache_through_the_log(wired: tuple[Cdc, SetupContext]) -> None:
    setup, ctx = wired
    pipeline = setup.pipeline
    assert pipeline is not None
    states = write_then_delete(setup, 60)
    assert states[SOURCE_STORE] == {"k": ("a-3", 3)}
    assert states["cache"] == {"k": ("a-3", 3)}

    evs = events(ctx)
    produced = [e for e in evs if e["type"] == "msg" and e["action"] == "produce"]
    assert sorted((e["key"], e["version"]) for e in produced) == [
        ("j", 1),
        ("j", 2),
        ("k", 1),
        ("k", 2),
        ("k", 3),
    ]
    # One partition per key (Debezium keys events by the primary key), offsets in order.
    assert len({e["partition"] for e in produced if e["key"] == "k"}) == 1
    applied = {(e["key"], e["version"]) for e in evs if e.get("action") == "apply"}
    assert applied == {(e["key"], e["version"]) for e in produced}
    assert all(
        e["consumer"] == "cdc-sync" and e["process"] == "consumer-0#1"
        for e in evs
        if e.get("action") == "deliver" and e["consumer"] != LOG_AUDIT
    )
    # The audit's read is the log audit too: every change it recorded is in the log.
    in_log = [e for e in evs if e.get("action") == "deliver" and e["consumer"] == LOG_AUDIT]
    assert [(e["msg_id"], e["offset"]) for e in in_log] == [
        (e["msg_id"], e["offset"]) for e in produced
    ]
    # The delete is a tombstone row: the consumer removed the key at version 2.
    assert ("j", None) in {(e["key"], e.get("value")) for e in evs if e.get("action") == "apply"}
    assert any(
        e["type"] == "mark" and e["kind"] == "consumer-done" and e["channel"] == pipeline.topic
        for e in evs
    )


@pytest.mark.services
def test_a_killed_consumer_resumes_from_its_commit_as_a_new_instance(
    wired: tuple[Cdc, SetupContext],
) -> None:
    setup, ctx = wired
    consumer = setup.process("consumer-0")
    assert consumer is not None and setup.process("consumer") is not None
    assert setup.process("kafka") is None  # the stack's own services stay the stack's
    client = setup.client("c1")
    consumer.kill()
    assert not consumer.is_running()
    for i in range(20):
        client.write(f"m{i % 4}", f"c1-{i}")
    consumer.start()
    consumer.wait_healthy(60)
    assert consumer.instance == "consumer-0#2"
    client.close()
    assert setup.quiesce(60)
    states = setup.final_states()
    for key in ("m0", "m1", "m2", "m3"):
        assert states["cache"][key] == states[SOURCE_STORE][key]
    evs = events(ctx)
    second = [e for e in evs if e.get("process") == "consumer-0#2" and e["type"] == "msg"]
    assert {e["key"] for e in second if e["action"] == "apply"} >= {"m0", "m1", "m2", "m3"}
    commits = [e for e in second if e["action"] == "commit"]
    assert commits and all(e["offset"] > 0 for e in commits)


@pytest.mark.services
def test_teardown_drops_the_replication_slot(stack: Stack, wired: tuple[Cdc, SetupContext]) -> None:
    setup, _ = wired
    pipeline = setup.pipeline
    assert pipeline is not None and pipeline.capture is not None
    slot = pipeline.capture.slot
    setup.teardown()  # the fixture's teardown after this one finds nothing left to do
    assert not any(c.is_running() for c in pipeline.consumers)
    with psycopg.connect(stack["postgres"].conninfo(), autocommit=True) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (slot,)
        ).fetchone()
    assert left == (0,)
