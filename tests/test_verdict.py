"""The verdict from coverage (driftlab.checkers.verdict.decide): each class of history the issue
names, built small, judged right; what makes a run inconclusive or the lab failed."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from driftlab.checkers.coverage import chances
from driftlab.checkers.kinds import BY_NAME
from driftlab.checkers.reference import CHECKERS
from driftlab.checkers.run_facts import busy_spans, fault_lines, slip_lines
from driftlab.checkers.verdict import (
    HELD,
    INCONCLUSIVE,
    LAB_FAILED,
    NO_EXPECTATIONS,
    NOT_REPRODUCED,
    REPRODUCED,
    UNEXPECTED,
    RunFacts,
    Verdict,
    decide,
)
from driftlab.harness.history import events as ev
from driftlab.harness.history.schema import COLUMNS, Event

CHANNEL = "dbz.items"


def history(*fields: dict[str, Any]) -> list[Event]:
    """Events built by the typed constructors, in time order."""
    return [Event(**({c: f.get(c) for c in COLUMNS} | {"time": i})) for i, f in enumerate(fields)]


def verdict(events: list[Event], expectations: dict[str, str], **facts: Any) -> Verdict:
    """The reference's counts and chances of `events` through decide()."""
    counts = Counter(a.kind for m in CHECKERS.values() for a in m.check(events))
    return decide(counts, chances(events), expectations, RunFacts(**facts))


def write(key: str, value: str, version: int = 1, phase: str = "ok") -> dict[str, Any]:
    return ev.op("c0", phase, "write", key=key, value=value, store="source", version=version)


NO_LOST_WRITE_CHANCE = (
    "lost-write had no chance in this history: it holds no acknowledged source write, "
    "in a history that quiesced, and a derived store with effects"
)


def test_a_run_that_tested_nothing_it_names_is_inconclusive() -> None:
    # Writes went in, nothing downstream recorded anything: no delivery, no final state.
    found = verdict(history(write("a", "a1"), ev.mark("quiesced")), {"lost-write": "absent"})
    assert found.verdict == INCONCLUSIVE and found.exit_code == 3
    assert found.reasons == [f"nothing the run names was tested: {NO_LOST_WRITE_CHANCE}"]
    assert found.untested == ["lost-write"]
    # Kinds the claim does not name do not matter.
    assert verdict(history(write("a", "a1")), {}).verdict == NO_EXPECTATIONS


def test_forbidden_kinds_without_a_chance_are_untested_and_the_verdict_stands() -> None:
    """A blanket "none of these may happen": the kinds the history could not show are
    listed as untested; the kinds it could show decide."""
    sends = [
        ev.msg("produce", channel=CHANNEL, msg_id=f"m{i}", partition=0, offset=i, process="p")
        for i in range(2)
    ]
    claim = {"inconsistent-offset": "absent", "lost-write": "absent", "extra": "absent"}
    found = verdict(history(*sends), claim)
    assert found.verdict == HELD and found.exit_code == 0 and not found.reasons
    assert found.untested == ["extra", "lost-write"]
    assert found.caveats[1] == NO_LOST_WRITE_CHANCE
    # The same kinds untested under a forbidden kind found: still unexpected.
    clash = ev.msg("produce", channel=CHANNEL, msg_id="m9", partition=0, offset=0, process="q")
    found = verdict(history(*sends, clash), claim)
    assert found.verdict == UNEXPECTED and found.untested == ["extra", "lost-write"]


def test_an_expected_kind_without_a_chance_is_inconclusive() -> None:
    sends = [
        ev.msg("produce", channel=CHANNEL, msg_id=f"m{i}", partition=0, offset=i, process="p")
        for i in range(2)
    ]
    claim = {"inconsistent-offset": "absent", "lost-write": "present"}
    found = verdict(history(*sends), claim)
    assert found.verdict == INCONCLUSIVE
    assert found.reasons == [NO_LOST_WRITE_CHANCE]
    assert found.expected_missing == ["lost-write"]


def test_a_history_without_client_operations_never_ran() -> None:
    found = verdict(history(ev.mark("end")), {}, ran=False)
    assert found.verdict == INCONCLUSIVE
    assert found.reasons == ["the workload never ran: the history holds no client operation"]


def test_a_forbidden_kind_found_fails_whatever_else_is_missing() -> None:
    two_at_one_offset = history(
        ev.msg("produce", channel=CHANNEL, msg_id="m1", partition=0, offset=0, process="p"),
        ev.msg("produce", channel=CHANNEL, msg_id="m2", partition=0, offset=0, process="q"),
    )
    found = verdict(
        two_at_one_offset,
        {"inconsistent-offset": "absent", "missing": "absent"},
        ran=False,
        faults=["scheduled fault crash consumer at 2.0 s never started"],
    )
    assert found.verdict == UNEXPECTED and found.exit_code == 1
    assert found.forbidden_found == ["inconsistent-offset"]


def test_the_labs_own_failure_comes_before_anything_else() -> None:
    failure = {"service": "kafka", "at": 12.5, "what": "exited with status 137"}
    two_at_one_offset = history(
        ev.msg("produce", channel=CHANNEL, msg_id="m1", partition=0, offset=0),
        ev.msg("produce", channel=CHANNEL, msg_id="m2", partition=0, offset=0),
    )
    found = verdict(two_at_one_offset, {"inconsistent-offset": "absent"}, lab_failures=[failure])
    assert found.verdict == LAB_FAILED and found.exit_code == 3
    assert found.reasons == ["the lab failed: kafka at 12.5 s: exited with status 137"]


def test_a_projection_read_without_deliveries_is_judged() -> None:
    """An event-sourced history: events appended, the projection's final state read,
    and no `deliver` event at all."""
    appended = [
        ev.msg("produce", channel="events:acct", key="acct-1", value=d, msg_id=f"e{i}", version=i)
        for i, d in enumerate(("5", "-2", "4"), start=1)
    ]
    right = history(*appended, ev.state("projection:balance", "acct-1", "7"))
    wrong = history(*appended, ev.state("projection:balance", "acct-1", "5"))
    claim = {"projection-mismatch": "absent"}
    assert verdict(right, claim).verdict == HELD
    assert verdict(wrong, claim).verdict == UNEXPECTED
    assert verdict(wrong, {"projection-mismatch": "present"}).verdict == REPRODUCED
    assert chances(right)["projection-mismatch"] == 1


def test_a_black_box_store_read_at_the_end_counts_as_observed() -> None:
    """A consumer that records nothing; its store's final state was read."""
    writes = [write("a", "a1"), write("b", "b1"), write("b", "b2", version=2)]
    finals = [ev.state("source", k, v) for k, v in (("a", "a1"), ("b", "b2"))]
    held = history(
        *writes, *finals, *(ev.state("cache", k, v) for k, v in (("a", "a1"), ("b", "b2")))
    )
    claim = {"missing": "absent", "stale": "absent", "phantom": "absent"}
    assert chances(held)["missing"] == 2
    assert verdict(held, claim).verdict == HELD
    behind = history(*writes, *finals, ev.state("cache", "a", "a1"), ev.state("cache", "b", "b1"))
    found = verdict(behind, claim)
    assert found.verdict == UNEXPECTED and found.forbidden_found == ["stale"]
    # A store never read at the end gives the divergence kinds no chance.
    assert verdict(history(*writes, *finals), claim).verdict == INCONCLUSIVE


def test_a_scenario_may_require_a_minimum_of_chances() -> None:
    sends = [
        ev.msg("produce", channel=CHANNEL, msg_id=f"m{i}", partition=0, offset=i, process="p")
        for i in range(3)
    ]
    events = history(*sends)
    claim = {"nonmonotonic-send": "absent"}
    assert verdict(events, claim, min_chances={"nonmonotonic-send": 2}).verdict == HELD
    found = verdict(events, claim, min_chances={"nonmonotonic-send": 100})
    assert found.verdict == INCONCLUSIVE
    assert found.reasons == [
        "nonmonotonic-send had 2 chance(s); the scenario requires at least 100"
    ]
    # A kind the claim does not name, required all the same.
    found = verdict(events, claim, min_chances={"lost-write": 1})
    assert found.reasons == ["lost-write had 0 chance(s); the scenario requires at least 1"]


def test_a_kind_whose_checker_failed_was_not_judged() -> None:
    events = history(ev.msg("produce", channel=CHANNEL, msg_id="m1", partition=0, offset=0))
    found = verdict(events, {"inconsistent-offset": "absent"}, failed_checkers=["reorder"])
    assert found.verdict == INCONCLUSIVE
    assert found.reasons == ["inconsistent-offset was not judged: the reorder checker failed"]


SCHEDULE = [
    {"kind": "crash", "target": "consumer", "at": 2.0, "duration": 1.0},
    {"kind": "cut", "target": "consumer->redis", "at": 4.5, "duration": 1.0},
    {"kind": "crash", "target": "consumer", "at": 7.0, "duration": 1.0},
]
OPS = [{"t": t, "f": "write", "ok": 3, "fail": 0, "info": 0} for t in range(10)]
BUSY = busy_spans(OPS, [], 1)


def test_each_fault_that_never_took_effect_or_had_no_operation_is_named() -> None:
    windows = [
        {"fault_id": "f1", "kind": "crash", "target": "consumer", "start": 2.0, "stop": 3.0},
        {
            "fault_id": "f2",
            "kind": "cut",
            "target": "consumer->redis",
            "start": 4.5,
            "stop": 4.5,
            "error": "not injected: no link",
        },
    ]
    assert fault_lines(windows, SCHEDULE, BUSY, 10.0) == [
        "scheduled fault cut consumer->redis at 4.5 s: not injected: no link",
        "scheduled fault crash consumer at 7 s never started (the run ended before it)",
    ]
    idle = [r for r in OPS if not 1 <= r["t"] <= 3]
    assert fault_lines(windows[:1], SCHEDULE[:1], busy_spans(idle, [], 1), 10.0) == [
        "fault crash consumer from 2.0 s to 3.0 s: no operation ran while it lasted"
    ]
    # An operation in flight through the window ran while it lasted: one completed at
    # 4 s after 2.5 s.
    slow = [{"t": 4, "f": "write", "count": 1, "p50_ms": 2500.0, "max_ms": 2500.0}]
    assert fault_lines(windows[:1], SCHEDULE[:1], busy_spans(idle, slow, 1), 10.0) == []
    every = [
        {
            "fault_id": f"f{i}",
            "kind": f["kind"],
            "target": f["target"],
            "start": f["at"],
            "stop": f["at"] + 1,
        }
        for i, f in enumerate(SCHEDULE)
    ]
    assert fault_lines(every, SCHEDULE, BUSY, 10.0) == []


def test_a_fault_at_a_moment_that_never_came_says_so() -> None:
    """config.json holds a moment as the Anchor's fields; the line says the moment
    never came, not that the run ended before a time."""
    ready = {"event": "ready", "subject": "consumer", "nth": 2, "above": 0.5}
    caught_up = {"event": "caught_up", "subject": "cache", "nth": 1, "above": 0.5}
    anchored = [
        {"kind": "crash", "target": "consumer", "at": 0.5, "duration": 1.0, "after": ready},
        {"kind": "cut", "target": "cache", "at": 0.0, "duration": 1.0, "after": caught_up},
    ]
    why = "(its moment never came, or too late to open before the run's end)"
    assert fault_lines([], anchored, BUSY, 10.0) == [
        f"scheduled fault cut cache 0 ms after the moment caught_up cache never started {why}",
        "scheduled fault crash consumer 500 ms after the moment ready consumer (occurrence 2) "
        f"never started {why}",
    ]


def test_a_window_is_matched_to_the_fault_that_opened_it() -> None:
    """The window's start names its planned `at`, and whether it waited for a moment:
    a fault that never came is named as such, whichever of its kind and target opened."""
    late = {"kind": "crash", "target": "consumer", "start": 7.1, "stop": 8.0, "planned_at": 7.0}
    assert fault_lines([late | {"after": None}], [SCHEDULE[0], SCHEDULE[2]], BUSY, 10.0) == [
        "scheduled fault crash consumer at 2 s never started (the run ended before it)"
    ]
    ready = {"event": "ready", "subject": "consumer", "nth": 1, "above": 0.5}
    anchored = {"kind": "crash", "target": "consumer", "at": 7.0, "after": ready}
    # A window at 7 s on the workload's clock is not one 7 s after a moment.
    assert fault_lines([late | {"after": None}], [anchored], BUSY, 10.0) == [
        "scheduled fault crash consumer 7000 ms after the moment ready consumer never "
        "started (its moment never came, or too late to open before the run's end)"
    ]
    opened = late | {"after": "consumer ready after its start"}
    assert fault_lines([opened], [anchored], BUSY, 10.0) == []


def window(start: float, stop: float | None, planned: float | None, **more: Any) -> dict[str, Any]:
    """A series.json fault window of a crash of the consumer."""
    return {"kind": "crash", "target": "connect", "start": start, "stop": stop} | {
        "planned_s": planned,
        **more,
    }


def test_a_window_that_lasted_well_beyond_its_plan_slipped() -> None:
    """The slip is the observed length less the planned one, with a tolerance of
    max(2 s, 50 %): a window that opened late but lasted as planned did not slip."""
    assert slip_lines([window(3.0, 31.0, 2.0)], 40.0) == [
        "fault crash connect slipped: planned for 2 s, it lasted 28.0 s (26.0 s more), "
        "from 3.0 s to 31.0 s"
    ]
    assert slip_lines([window(3.0, None, 2.0)], 12.0) == [
        "fault crash connect slipped: planned for 2 s, it lasted 9.0 s (7.0 s more), "
        "from 3.0 s and was still open when the history ended"
    ]
    within = [window(3.0, 6.9, 2.0), window(30.0, 44.9, 10.0), window(50.0, 52.0, 2.0)]
    assert slip_lines(within, 60.0) == []
    assert len(slip_lines([window(3.0, 7.1, 2.0), window(30.0, 45.1, 10.0)], 60.0)) == 2
    # Nothing planned to slip against: a restart (0 s), an older series, a fault that
    # was never injected.
    never = window(3.0, 3.0, 2.0, error="not injected: no link")
    assert slip_lines([window(3.0, 20.0, 0.0), window(3.0, 20.0, None), never], 30.0) == []


SLIPPED = ["fault crash connect slipped: planned for 2 s, it lasted 28.0 s"]
NEVER = ["scheduled fault crash consumer at 7 s never started (the run ended before it)"]


def test_a_found_prediction_stands_whatever_a_fault_did() -> None:
    """C4 under load: the prediction was found, a later crash never started and an
    earlier one slipped: reproduced, both said beside it."""
    counts, chances_of = {"lost-write": 98}, {"lost-write": 300, "stale": 40}
    claim = {"lost-write": "present", "stale": "absent"}
    found = decide(counts, chances_of, claim, RunFacts(faults=NEVER, slipped=SLIPPED))
    assert found.verdict == REPRODUCED and found.exit_code == 0
    assert found.caveats == SLIPPED + NEVER


def test_a_finding_of_absence_rests_on_its_faults() -> None:
    """held and not reproduced say that something did not happen: a fault that never
    took effect makes them inconclusive; one that slipped is said beside held."""
    chances_of = {"lost-write": 300, "stale": 40}
    held = {"lost-write": "absent", "stale": "absent"}
    found = decide({}, chances_of, held, RunFacts(faults=NEVER))
    assert found.verdict == INCONCLUSIVE and found.reasons == NEVER
    found = decide({}, chances_of, held, RunFacts(slipped=SLIPPED))
    assert found.verdict == HELD
    assert found.caveats == [f"{SLIPPED[0]}; the held verdict rests on it"]
    predicted = {"lost-write": "present"}
    assert decide({}, chances_of, predicted, RunFacts()).verdict == NOT_REPRODUCED
    found = decide({}, chances_of, predicted, RunFacts(faults=NEVER))
    assert found.verdict == INCONCLUSIVE and found.reasons == NEVER


def test_the_lab_failures_of_run_json_are_read(tmp_path: Path) -> None:
    from driftlab.checkers.run_facts import summary_facts
    from driftlab.harness.history.rundir import RunDir

    run = RunDir(tmp_path)
    none = summary_facts(run)
    assert not (none.lab_failures or none.not_converged or none.not_back or none.unreadable)
    run.logs.mkdir()
    failure = {"service": "postgres", "at": 3.0, "what": "killed"}
    run.summary.write_text(json.dumps({"lab_failures": [failure]}))
    assert summary_facts(run).lab_failures == [failure]


def test_a_store_that_did_not_converge_fails_the_run_whatever_the_counts() -> None:
    chances_of = {"missing": 5, "stale": 5}
    line = "store cache: 2 key(s) differ from the source (k1, k2); settled so"
    absent = {"missing": "absent", "stale": "absent"}
    assert decide({}, chances_of, absent, RunFacts()).verdict == HELD
    failed = decide({}, chances_of, absent, RunFacts(not_converged=[line]))
    assert failed.verdict == UNEXPECTED and failed.exit_code == 1
    assert failed.reasons == [f"not converged: {line}"] and failed.forbidden_found == []
    # A reproduced prediction does not excuse it, nor does a run that named nothing.
    found = decide({"missing": 2}, chances_of, {"missing": "present"}, RunFacts(not_back=["p"]))
    assert found.verdict == UNEXPECTED and found.reasons == ["p"]
    assert decide({}, {}, {}, RunFacts(not_converged=[line])).verdict == UNEXPECTED
    # The lab's own failure and a store that could not be read still come first.
    lab = [{"service": "kafka", "at": 1.0, "what": "died"}]
    both = RunFacts(lab_failures=lab, not_converged=[line])
    assert decide({}, chances_of, absent, both).verdict == LAB_FAILED
    unread = RunFacts(unreadable=["store cache could not be read"], not_converged=[line])
    assert decide({}, chances_of, absent, unread).verdict == INCONCLUSIVE


def test_the_setups_findings_in_run_json_are_facts_of_the_verdict(tmp_path: Path) -> None:
    from driftlab.checkers.run_facts import summary_facts
    from driftlab.harness.history.rundir import NotConverged, RunDir, RunSummary

    run = RunDir(tmp_path)
    run.logs.mkdir()
    store = NotConverged("cache", ["k1"], 1, True, 2.5, False, "store cache: 1 key(s) differ")
    RunSummary(
        run_id="r",
        not_converged=[store],
        not_back=["your process mirror did not come back after crash"],
        unreadable_stores={"index": "connection refused"},
    ).write(run.summary)
    assert RunSummary.read(run.summary).not_converged == [store]
    facts = summary_facts(run)
    assert facts.not_converged == ["store cache: 1 key(s) differ"]
    assert facts.not_back == ["your process mirror did not come back after crash"]
    assert facts.unreadable == [
        "store index could not be read at the final reading (connection refused); "
        "fix how it is read"
    ]


KINDS = sorted(BY_NAME)


@settings(max_examples=300, deadline=None)
@given(
    counts=st.dictionaries(st.sampled_from(KINDS), st.integers(0, 3)),
    chances_of=st.dictionaries(st.sampled_from(KINDS), st.integers(0, 3)),
    expectations=st.dictionaries(st.sampled_from(KINDS), st.sampled_from(["present", "absent"])),
    failed=st.booleans(),
    diverged=st.booleans(),
)
def test_the_verdicts_order(
    counts: dict[str, int],
    chances_of: dict[str, int],
    expectations: dict[str, str],
    failed: bool,
    diverged: bool,
) -> None:
    """Whatever the counts and chances: the lab's failure first, then a forbidden kind
    found or a store that did not converge, then nothing named tested or an expected
    kind untested, then the expectations, with the other untested kinds listed."""
    lab = [{"service": "kafka", "at": 1.0, "what": "died"}] if failed else []
    stores = ["store cache: 3 key(s) differ from the source"] if diverged else []
    facts = RunFacts(lab_failures=lab, not_converged=stores)
    found = decide(counts, chances_of, expectations, facts)
    forbidden = [k for k, v in expectations.items() if v == "absent" and counts.get(k)]
    untested = sorted(k for k in expectations if not counts.get(k) and not chances_of.get(k))
    decisive = (
        untested
        if len(untested) == len(expectations)
        else [k for k in untested if expectations[k] == "present"]
    )
    if failed:
        assert found.verdict == LAB_FAILED
    elif diverged:
        assert found.verdict == UNEXPECTED and found.forbidden_found == sorted(forbidden)
        assert found.reasons == [f"not converged: {stores[0]}"]
    elif forbidden:
        assert found.verdict == UNEXPECTED and found.forbidden_found == sorted(forbidden)
    elif decisive:
        assert found.verdict == INCONCLUSIVE
        prefix = "nothing the run names was tested: "
        assert [r.removeprefix(prefix).split()[0] for r in found.reasons] == decisive
    else:
        assert found.verdict not in (INCONCLUSIVE, LAB_FAILED) and not found.reasons
        assert found.untested == untested
        assert [c.split()[0] for c in found.caveats] == untested


def pass_windows(timed: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The fault windows the keyed pass's series gives for the events `timed` (time in
    ns, fields), by fault id."""
    from keyed_support import history_table

    from driftlab.checkers.keyed.columns import SERIES_ROW
    from driftlab.checkers.keyed.routing import route, with_positions
    from driftlab.checkers.keyed.timeline import series_rows

    events = [Event(**({c: f.get(c) for c in COLUMNS} | {"time": t})) for t, f in timed]
    routed = route(with_positions(history_table(events), 0), 1)
    rows = series_rows(routed.series[0], 0, 1).to_pylist()
    return sorted(
        (json.loads(r["detail"]) for r in rows if r["out"] == SERIES_ROW and r["kind"] == "faults"),
        key=lambda w: w["fault_id"],
    )


def test_the_pass_gives_each_window_its_planned_length_and_anchor() -> None:
    """The keyed pass's fault series (driftlab.checkers.keyed.timeline) carries the planned
    duration and the anchor of each window's start event, so a window that lasted
    28 s where 2 were planned is found slipped, one that lasted its plan is not."""
    s = 1_000_000_000
    timed = [
        (0, write("a", "a1")),
        (3 * s, ev.fault("start", "crash", target="connect", fault_id="f1",
                         extra=json.dumps({"at": 2.0, "duration": 2.0}))),
        (31 * s, ev.fault("stop", "crash", target="connect", fault_id="f1")),
        (33 * s, ev.fault("start", "cut", target="connect->pg", fault_id="f2",
                          extra=json.dumps({"after": "snapshot", "at": 0.5, "duration": 1.0}))),
        (34 * s, ev.fault("stop", "cut", target="connect->pg", fault_id="f2")),
        (40 * s, write("b", "b1")),
    ]  # fmt: skip
    windows = pass_windows(timed)
    assert [(w["planned_s"], w["after"]) for w in windows] == [(2.0, None), (1.0, "snapshot")]
    assert slip_lines(windows, 40.0) == [
        "fault crash connect slipped: planned for 2 s, it lasted 28.0 s (26.0 s more), "
        "from 3.0 s to 31.0 s"
    ]


def test_a_busy_crash_that_struck_idle_gave_no_chance_to_what_it_causes() -> None:
    """C3 on a loaded docker stack: the `when: busy` kill waited out its `wait` and
    struck a consumer with nothing applied and uncommitted, so nothing could be
    delivered again. The pass carries the start's `busy: false` as `idle`; the window
    is a fault that never took effect, and `not reproduced` becomes inconclusive."""
    s = 1_000_000_000
    busy = {"at": 1.25, "duration": 0.25, "when": "busy"}
    timed = [
        (0, write("a", "a1")),
        (1 * s, ev.fault("start", "crash", target="consumer", fault_id="f1",
                         extra=json.dumps(busy | {"busy": True}))),
        (2 * s, ev.fault("stop", "crash", target="consumer", fault_id="f1")),
        (3 * s, ev.fault("start", "crash", target="consumer", fault_id="f2",
                         extra=json.dumps(busy | {"at": 3.5, "busy": False}))),
        (4 * s, ev.fault("stop", "crash", target="consumer", fault_id="f2")),
        (6 * s, write("b", "b1")),
    ]  # fmt: skip
    windows = pass_windows(timed)
    assert [w["idle"] for w in windows] == [False, True]
    schedule = [
        {"kind": "crash", "target": "consumer", "at": at, "duration": 0.25} for at in (1.25, 3.5)
    ]
    lines = fault_lines(windows, schedule, BUSY, 6.0)
    assert lines == [
        "fault crash consumer at 3.0 s struck its target while it was not busy "
        "(its wait ran out): it cut no work short"
    ]
    predicted = {"duplicate-delivery": "present"}
    found = decide({}, {"duplicate-delivery": 700}, predicted, RunFacts(faults=lines))
    assert found.verdict == INCONCLUSIVE and found.reasons == lines
    found = decide(
        {"duplicate-delivery": 9}, {"duplicate-delivery": 700}, predicted, RunFacts(faults=lines)
    )
    assert found.verdict == REPRODUCED and found.caveats == lines
