"""Report building blocks without Spark or a browser: charts, sequence diagrams, the
suite page from run folders, and the errors a reader gets for bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from analysis_outputs import analysis_json, examples_json
from typer.testing import CliRunner

from driftlab.checkers.analysis_files import Examples
from driftlab.harness.cli import app
from driftlab.harness.history.rundir import SUMMARY_JSON
from driftlab.harness.lab.testing.synthetic import generate_history
from driftlab.reports.plots import Chart, Line, Window, render_chart
from driftlab.reports.render import ReportError
from driftlab.reports.run_report import MAX_KEY_EVENTS, fault_rows, key_events, render_run_report
from driftlab.reports.sequence import build_diagram, pick_targets, read_key_events, render_diagram
from driftlab.reports.suite_page import (
    RunInfo,
    build_suite_context,
    evidence_line,
    render_suite,
    scan_runs,
)

T0 = 1_767_225_600_000_000_000
MS = 1_000_000


def test_chart_shades_and_names_every_fault_window() -> None:
    chart = Chart(
        "throughput",
        "ops/s",
        10.0,
        [Line("write ok", [(0.5, 10.0), (1.5, None), (2.5, 30.0), (3.5, 20.0)])],
        [Window("partition kafka", 2.0, 4.0), Window("crash consumer:g1", 8.0, None)],
    )
    svg = str(render_chart(chart))
    assert svg.count('class="fault-window"') == 2
    assert "partition kafka" in svg and "crash consumer:g1: 8.00s to never stopped" in svg
    # The None splits the line: one lone point, then a two-point polyline.
    assert svg.count("<polyline") == 1 and svg.count("<circle") == 1


def test_empty_chart_says_so() -> None:
    assert "no data in this run" in str(render_chart(Chart("lag", "ms", 5.0)))


def _op(t_ms: int, process: str, phase: str, op_id: str, store: str, value: str) -> dict:
    return {
        "type": "op",
        "time": T0 + t_ms * MS,
        "process": process,
        "phase": phase,
        "f": "write",
        "op_id": op_id,
        "key": "x",
        "value": value,
        "version": None,
        "store": store,
        "action": None,
        "channel": None,
        "partition": None,
        "offset": None,
        "consumer": None,
    }


def _state(t_ms: int, store: str, value: str) -> dict:
    return _op(t_ms, "runner", "", "", store, value) | {"type": "state", "f": None}


FIGURE_11_4 = [
    # Client 1 writes A to the database, client 2 writes B; the cache gets B, then A.
    _op(0, "client-1", "invoke", "w1", "source", "A"),
    _op(1, "client-1", "ok", "w1", "source", "A"),
    _op(2, "client-2", "invoke", "w2", "source", "B"),
    _op(3, "client-2", "ok", "w2", "source", "B"),
    _op(4, "client-2", "invoke", "c2", "cache", "B"),
    _op(5, "client-2", "ok", "c2", "cache", "B"),
    _op(6, "client-1", "invoke", "c1", "cache", "A"),
    _op(7, "client-1", "ok", "c1", "cache", "A"),
    _op(8, "client-3", "invoke", "w3", "source", "C"),  # never answered
    _state(20, "source", "B"),
    _state(21, "cache", "A"),
]


def test_sequence_diagram_shows_the_interleaving_and_the_diverged_final_state() -> None:
    d = build_diagram(FIGURE_11_4, "x", "cache", "stale", "cache holds A", T0 + 21 * MS)
    order = [(a.actor, a.store, a.value, a.outcome) for a in d.arrows]
    assert order == [
        ("client-1", "source", "A", "ok"),
        ("client-2", "source", "B", "ok"),
        ("client-2", "cache", "B", "ok"),
        ("client-1", "cache", "A", "ok"),
        ("client-3", "source", "C", "info"),
    ]
    assert d.finals == {"source": "B", "cache": "A"}
    svg = str(render_diagram(d, T0))
    for lane in ("client-1", "client-2", "client-3", "source", "cache"):
        assert f">{lane}</text>" in svg
    assert svg.count('class="write"') == 5
    assert 'class="final differs"' in svg and "final: A" in svg
    assert "set C (no reply) info" in svg


def test_long_key_histories_keep_the_arrows_before_the_anomaly() -> None:
    events = []
    for i in range(40):
        events += [
            _op(10 * i, "client-1", "invoke", f"w{i}", "source", str(i)),
            _op(10 * i + 1, "client-1", "ok", f"w{i}", "source", str(i)),
        ]
    d = build_diagram(events, "x", "cache", "contradictory-order", "", T0 + 105 * MS)
    assert 0 < len(d.arrows) <= 16 and d.omitted == 40 - len(d.arrows)
    assert any(a.value == "10" for a in d.arrows)  # the write just before the anomaly
    final = build_diagram(events, "x", "cache", "stale", "", T0 + 105 * MS)
    assert final.arrows[-1].value == "39"  # a final-state anomaly shows the last writes


def test_pick_targets_prefers_divergence_and_skips_keyless_examples() -> None:
    examples = examples_json(
        {
            "lost-message": [{"key": "k9", "store": None}],
            "contradictory-order": [
                {"key": "k1", "store": "cache", "detail": "cycle", "time_ns": 5}
            ],
            "stale": [
                {"key": "k1", "store": "cache", "detail": "old", "time_ns": 9},
                {"key": "k2", "store": None},
            ],
        }
    )
    assert pick_targets(Examples.model_validate(examples)) == [("k1", "cache", "stale", "old", 9)]


def test_key_events_are_read_with_a_filter(tmp_path: Path) -> None:
    generate_history(tmp_path, events=3000, seed=3)
    events = read_key_events(tmp_path / "history.parquet", ["acct-1", "nope"])
    assert events["nope"] == []
    assert events["acct-1"] and {e["key"] for e in events["acct-1"]} == {"acct-1"}
    times = [e["time"] for e in events["acct-1"]]
    assert times == sorted(times)


def _run_folder(runs: Path, scenario: str, stamp: str, claim: str | None, **analysis) -> Path:
    run = runs / scenario / f"{stamp}-0"
    (run / "logs").mkdir(parents=True)
    config = {"scenario": scenario, "seed": 0, "claim": claim, "params": {"summary": "s"}}
    (run / "config.json").write_text(json.dumps(config))
    if analysis:
        (run / "analysis.json").write_text(json.dumps(analysis_json(**analysis)))
    return run


def test_suite_page_gives_each_claim_its_latest_verdict_and_trend(tmp_path: Path) -> None:
    exp = {"stale": "present", "phantom": "absent"}
    _run_folder(
        tmp_path,
        "dual-write-race",
        "20260101T000000Z",
        "C1",
        verdict="not reproduced",
        counts={"stale": 0},
        expectations=exp,
    )
    _run_folder(
        tmp_path,
        "dual-write-race",
        "20260102T000000Z",
        "C1",
        verdict="reproduced",
        counts={"stale": 7},
        expectations=exp,
    )
    newest = _run_folder(
        tmp_path,
        "dual-write-race",
        "20260103T000000Z",
        "C1",
        verdict="unexpected anomaly",
        counts={"stale": 2, "phantom": 1},
        expectations=exp,
    )
    (newest / "report.html").write_text("<html></html>")
    _run_folder(tmp_path, "synthetic", "20260101T000000Z", None)  # never analysed
    (tmp_path / "latest").symlink_to("dual-write-race/20260103T000000Z-0")

    assert len(scan_runs(tmp_path)) == 4
    ctx = build_suite_context(tmp_path)
    claim = next(c for c in ctx["claims"] if c["claim"] == "C1")
    assert claim["verdict"] == "unexpected anomaly"
    (c1,) = claim["rows"]
    assert [r.verdict for r in c1["trend"]] == [
        "not reproduced",
        "reproduced",
        "unexpected anomaly",
    ]
    assert c1["evidence"] == ("forbidden but found: phantom 1; found as predicted: stale 2")
    assert c1["last"].report == "dual-write-race/20260103T000000Z-0/report.html"
    assert [o["scenario"] for o in ctx["others"]] == ["synthetic"]
    assert ctx["others"][0]["verdict"] == "not judged"
    assert ctx["others"][0]["evidence"] == (
        "recorded, not analysed: driftlab analyze runs/synthetic/20260101T000000Z-0"
    )
    page = render_suite(tmp_path).read_text()
    assert 'href="dual-write-race/20260103T000000Z-0/report.html"' in page
    assert page.count('id="claim-C') == 17


def test_evidence_line_names_what_is_missing() -> None:
    run = RunInfo(
        "a/b",
        "a",
        "C4",
        None,
        "t",
        "not reproduced",
        {"lost-message": 0},
        {"lost-message": "present", "duplicate-delivery": "absent"},
    )
    assert evidence_line(run) == (
        "predicted but not found: lost-message; none of duplicate-delivery"
    )


def test_report_errors_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="driftlab analyze"):
        render_run_report(tmp_path)
    (tmp_path / "analysis.json").write_text("{not json")
    with pytest.raises(ReportError, match="not readable JSON"):
        render_run_report(tmp_path)
    cli = CliRunner()
    result = cli.invoke(app, ["report", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "not a run directory" in result.output
    result = cli.invoke(app, ["report", "--suite", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "not a folder of runs" in result.output


def test_a_consumer_named_like_its_store_gets_its_own_lane() -> None:
    apply = _op(30, "view", "", "", "view", "A") | {
        "type": "msg",
        "action": "apply",
        "f": None,
        "consumer": "view",
        "offset": 4,
    }
    d = build_diagram([*FIGURE_11_4[:2], apply], "x", "view", "stale", "", T0)
    svg = str(render_diagram(d, T0))
    assert ">view (consumer)</text>" in svg and ">view</text>" in svg
    assert svg.count('class="write"') == 2


def test_an_inconclusive_run_lists_what_it_lacked_on_its_report_and_the_suite_page(
    tmp_path: Path,
) -> None:
    missing = [
        "nothing was delivered: 40 message(s) produced on dbz.items, none delivered",
        "scheduled fault crash consumer at 2.0 s never started (the run ended before it)",
    ]
    run = _run_folder(
        tmp_path,
        "cdc-consumer-crash",
        "20260101T000000Z",
        "C3",
        verdict="inconclusive",
        inconclusive=missing,
        counts={"lost-message": 0},
        expectations={"lost-message": "absent"},
        history={"events": 90, "segments": 1, "t0_ns": T0, "t1_ns": T0 + 5000 * MS},
    )
    assert evidence_line(scan_runs(tmp_path)[0]) == "inconclusive, missing: " + "; ".join(missing)
    page = render_run_report(run).read_text()
    block = page[page.index('id="inconclusive"') :]
    block = block[: block.index("</div>")]
    assert all(why in block for why in missing)
    assert 'class="verdict v-inconclusive">inconclusive<' in page
    assert "inconclusive, missing: nothing was delivered" in render_suite(tmp_path).read_text()


def test_lost_examples_say_whether_the_log_still_holds_them(tmp_path: Path) -> None:
    skipped = (
        "m7 produced on t, never delivered to g; still in the log at t[0]@7: the consumer "
        "skipped it"
    )
    expired = (
        "m2 produced on t, never delivered to g; not in the log read back after quiescence: "
        "the broker lost it or retention or compaction removed it"
    )
    run = _run_folder(
        tmp_path,
        "bounded-log",
        "20260101T000000Z",
        "C6",
        verdict="no expectations",
        counts={"lost-message": 2},
        lost_where={"lost-message": {"in the log": 1, "not in the log": 1, "unknown": 0}},
        history={"events": 9, "segments": 1, "t0_ns": T0, "t1_ns": T0 + 1000 * MS},
    )
    audit = {
        "type": "msg",
        "action": "deliver",
        "consumer": "log-audit",
        "process": "log-audit",
        "channel": "t",
        "partition": 0,
        "offset": 7,
        "msg_id": "m7",
        "time": T0 + 900 * MS,
    }
    examples = [
        {"consumer": "g", "detail": skipped, "evidence": [audit]},
        {"consumer": "g", "detail": expired, "evidence": []},
    ]
    (run / "examples.json").write_text(json.dumps(examples_json({"lost-message": examples})))
    page = render_run_report(run).read_text()
    where = page[page.index('id="lost-where"') :]
    where = where[: where.index("</p>")]
    assert "lost-message 1 still in the log (the consumer skipped them), 1 not in the log" in where
    assert '<span class="log-place">in the log</span> m7 produced' in page
    assert '<span class="log-place">not in the log</span> m2 produced' in page
    assert "in the log, read back after quiescence: t[0] offset 7 m7" in page


def test_the_events_that_make_an_anomaly_come_first_the_rest_fold() -> None:
    def write(t: int, store: str, value: str) -> dict:
        return {
            "type": "op",
            "phase": "ok",
            "f": "write",
            "key": "k",
            "value": value,
            "store": store,
            "time": T0 + t * MS,
        }

    state = {"type": "state", "key": "k", "store": "cache", "value": "old", "time": T0 + 99 * MS}
    evidence = [
        {"type": "state", "key": "k", "store": "source", "value": "new", "time": T0 + 98 * MS},
        state,
        *[write(i, "source", f"v{i}") for i in range(10)],
        write(20, "cache", "new"),
        write(21, "cache", "old"),
    ]
    detail = "cache holds 'k' = 'old', an older committed value; the source holds 'new'"
    picked = key_events(evidence, detail, T0 + 99 * MS)
    assert len(picked) == MAX_KEY_EVENTS
    # In time order: the newer value reached the cache, then the older one; the finals.
    assert [evidence[i]["value"] for i in picked] == ["new", "old", "new", "old"]
    assert key_events(evidence[:3], detail, None) == [0, 1, 2]


def test_a_fault_is_one_row_planned_and_observed_on_the_history_clock() -> None:
    plan = [
        {"kind": "crash", "target": "consumer", "at": 2.5, "duration": 0.5},
        {"kind": "crash", "target": "consumer", "at": 7.0, "duration": 0.5},
        {"kind": "cut", "target": "redis", "at": 9.0, "duration": 1.0},
    ]
    seen = [
        {"kind": "crash", "target": "consumer", "start": 28.9, "stop": 31.1, "planned_at": 7.0},
        {"kind": "crash", "target": "consumer", "start": 23.7, "stop": 26.3, "planned_at": 2.5},
    ]
    rows = fault_rows(plan, seen, 21.16)
    assert [(r["start"], r["observed"]["start"] if r["observed"] else None) for r in rows] == [
        (pytest.approx(23.66), 23.7),
        (pytest.approx(28.16), 28.9),
        (pytest.approx(30.16), None),  # planned, never started
    ]
    assert fault_rows(plan[:1], seen[1:], None)[0]["start"] is None  # no workload-start mark


def test_counts_and_chances_read_as_the_cli_prints_them(tmp_path: Path) -> None:
    run = _run_folder(
        tmp_path,
        "dual-write-race",
        "20260101T000000Z",
        "C1",
        verdict="reproduced",
        counts={"stale-overwrite": 4753},
        coverage={"stale-overwrite": 15026},
        expectations={"stale-overwrite": "present"},
        history={"events": 90, "segments": 1, "t0_ns": T0, "t1_ns": T0 + 5000 * MS},
    )
    page = render_run_report(run).read_text()
    assert "found 4,753 in 15,026 chances" in page
    row = page[page.index('href="#kind-stale-overwrite"') :]
    row = row[: row.index("</tr>")]
    assert ">4,753<" in row and ">15,026<" in row
    assert "4753" not in page and "15026" not in page


def test_an_inconclusive_run_says_why_once_and_keeps_any_other_error(tmp_path: Path) -> None:
    why = "stale-overwrite had no chance in this history"
    run = _run_folder(
        tmp_path,
        "pipeline",
        "20260101T000000Z",
        None,
        verdict="inconclusive",
        inconclusive=[why],
        reasons=[why],
        counts={"stale-overwrite": 0},
        expectations={"stale-overwrite": "absent"},
        history={"events": 90, "segments": 1, "t0_ns": T0, "t1_ns": T0 + 5000 * MS},
    )
    summary = run / "logs" / "run.json"
    summary.write_text(json.dumps({"error": f"inconclusive: {why}"}))
    page = render_run_report(run).read_text()
    assert page.count(why) == 1 and "Run error" not in page
    summary.write_text(json.dumps({"error": "not converged: store cache: 3 key(s) differ"}))
    page = render_run_report(run).read_text()
    assert "Run error: not converged: store cache: 3 key(s) differ" in page


def test_a_run_with_no_anomaly_says_so_where_its_examples_would_be(tmp_path: Path) -> None:
    history = {"events": 90, "segments": 1, "t0_ns": T0, "t1_ns": T0 + 5000 * MS}

    def pipeline_run(stamp: str, verdict: str, counts: dict[str, int]) -> Path:
        return _run_folder(
            tmp_path,
            "pipeline",
            stamp,
            None,
            verdict=verdict,
            counts=counts,
            expectations={"missing": "absent"},
            history=history,
        )

    clean = pipeline_run("20260101T000000Z", "reproduced", {"missing": 0, "stale": 0})
    page = render_run_report(clean).read_text()
    examples = page[page.index('<section id="examples">') : page.index('<section id="files">')]
    assert "No anomaly found: no example to show." in examples
    assert 'id="filter"' not in examples
    found = pipeline_run("20260102T000000Z", "unexpected anomaly", {"missing": 3})
    page = render_run_report(found).read_text()
    assert "No anomaly found" not in page and 'id="filter"' in page


def test_every_kind_link_of_the_summary_leads_to_its_examples(tmp_path: Path) -> None:
    run = _run_folder(
        tmp_path,
        "pipeline",
        "20260101T000000Z",
        None,
        verdict="unexpected anomaly",
        counts={"missing": 3, "stale": 0},
        expectations={"missing": "absent", "stale": "absent"},
        history={"events": 90, "segments": 1, "t0_ns": T0, "t1_ns": T0 + 5000 * MS},
    )
    page = render_run_report(run).read_text()
    links = re.findall(r'href="#(kind-[a-z-]+)"', page)
    assert links == ["kind-missing"]
    assert all(f'id="{anchor}"' in page for anchor in links)


def test_a_run_report_links_the_suite_page_only_where_one_was_written(tmp_path: Path) -> None:
    history = {"events": 9, "segments": 1, "t0_ns": T0, "t1_ns": T0 + 1000 * MS}
    run = _run_folder(
        tmp_path, "pipeline", "20260101T000000Z", None, verdict="held", history=history
    )
    (run / "logs" / SUMMARY_JSON).write_text(json.dumps({"ops": 9, "quiesced": False, "wall_s": 1}))
    page = render_run_report(run).read_text()
    assert "index.html" not in page
    assert "did not quiesce" in page and "False" not in page
    render_suite(tmp_path)
    assert 'href="../../index.html"' in render_run_report(run).read_text()


def test_a_verdict_that_stands_lists_its_untested_kinds_and_slipped_faults(
    tmp_path: Path,
) -> None:
    """A pipeline's held run: the kinds named without a chance listed as untested, a
    slipped fault window said under the verdict; the kinds nobody named that the history
    gave no chance are one line, not a row each; the page says what a chance is."""
    slipped = (
        "fault crash connect slipped: planned for 2 s, it lasted 28.0 s (26.0 s more), "
        "from 3.0 s to 31.0 s; the held verdict rests on it"
    )
    untested = "extra had no chance in this history: it holds no key held by the store"
    coverage = {"missing": 40, "stale": 40, "extra": 0, "lost-message": 0, "poll-skip": 0}
    run = _run_folder(
        tmp_path,
        "pipeline",
        "20260101T000000Z",
        None,
        verdict="held",
        untested=["extra"],
        caveats=[untested, slipped],
        counts=dict.fromkeys(coverage, 0),
        coverage=coverage,
        expectations={"missing": "absent", "stale": "absent", "extra": "absent"},
        history={"events": 90, "segments": 1, "t0_ns": T0, "t1_ns": T0 + 5000 * MS},
    )
    page = render_run_report(run).read_text()
    block = page[page.index('id="caveats"') :]
    block = block[: block.index("</div>")]
    assert untested in block and slipped in block
    assert '<span id="untested">extra</span>' in block
    summary = page[page.index('id="summary-table"') : page.index('id="no-chance"')]
    assert "extra" in summary and "lost-message" not in summary and "poll-skip" not in summary
    assert "no chance, none found, not named by the expectations): lost-message, poll-skip." in (
        page
    )
    assert 'id="chance-note"' in page and "docs/checkers.md" in page
    assert "<title>pipeline held:" in page
    # The suite page's evidence does not count an untested kind as one that held.
    assert evidence_line(scan_runs(tmp_path)[0]) == (
        "none of missing, stale; untested (no chance): extra"
    )


def test_the_workload_line_shows_the_settings_that_apply() -> None:
    from driftlab.reports.run_report import workload_settings

    writes_only = {
        "clients": 4,
        "distribution": "uniform",
        "zipf_s": 1.1,
        "mix": {"write": 1.0},
        "read_own": True,
        "read_stores": None,
        "rate": 100.0,
        "rotate_s": 0.0,
    }
    assert workload_settings(writes_only) == [
        "clients=4",
        "distribution=uniform",
        "mix=write 1",
        "rate=100",
    ]
    mixed = writes_only | {"distribution": "zipf", "mix": {"write": 3.0, "read": 1.0}}
    assert workload_settings(mixed | {"read_stores": ["cache"], "rotate_s": 2.0}) == [
        "clients=4",
        "distribution=zipf",
        "zipf_s=1.1",
        "mix=write 3, read 1",
        "read_own=True",
        "read_stores=cache",
        "rate=100",
        "rotate_s=2",
    ]


def test_a_rerendered_suite_page_is_dated_now_and_says_when_the_suite_ran(
    tmp_path: Path,
) -> None:
    from datetime import UTC, datetime

    _run_folder(tmp_path, "dual-write-race", "20260101T000000Z", "C1", verdict="reproduced")
    (tmp_path / "index.json").write_text(
        json.dumps({"generated_utc": "2026-01-01T00:05:00Z", "wall_s": 300.0, "runs": []})
    )
    before = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    page = render_suite(tmp_path).read_text()
    generated = re.search(r'<span id="generated">([^<]+)</span>', page)
    assert generated is not None and generated[1] >= before
    assert (
        'the last suite took 300.0 s, ended <span id="index-written">2026-01-01T00:05:00Z</span>'
        in page
    )


def test_each_trend_mark_names_its_runs_seed_and_duration(tmp_path: Path) -> None:
    for stamp, seed, duration in (("20260101T000000Z", 3, 8), ("20260102T000000Z", 7, 20)):
        run = _run_folder(tmp_path, "dual-write-race", stamp, "C1", verdict="reproduced")
        config = json.loads((run / "config.json").read_text())
        config["seed"], config["params"]["workload"] = seed, {"duration": duration}
        (run / "config.json").write_text(json.dumps(config))
    page = render_suite(tmp_path).read_text()
    assert 'title="2026-01-01T00:00:00Z: reproduced (seed 3, 8 s)"' in page
    assert 'title="2026-01-02T00:00:00Z: reproduced (seed 7, 20 s)"' in page


def test_a_suite_of_pipeline_files_only_leads_with_them(tmp_path: Path) -> None:
    """`suite --only a.toml,b.toml`: no claim ran; the user's pipelines lead the page and
    the headline counts their verdicts, the failure included."""
    _run_folder(tmp_path, "mirror", "20260101T000000Z", None, verdict="held")
    _run_folder(tmp_path, "relay", "20260101T000000Z", None, verdict="unexpected anomaly")
    page = render_suite(tmp_path).read_text()
    tally = page[page.index('<span id="tally-others">') :]
    tally = tally[: tally.index("</span> ·")]
    assert "2 scenario(s) of your own:" in tally
    assert "1 unexpected anomaly" in tally and "1 held" in tally
    assert page.index("Your scenarios and pipelines") < page.index("<h2>Claims</h2>")
    # With a claim run, the claims lead and the others follow, counted too.
    _run_folder(tmp_path, "dual-write-race", "20260101T000000Z", "C1", verdict="reproduced")
    page = render_suite(tmp_path).read_text()
    assert page.index("<h2>Claims</h2>") < page.index("<h2>Other scenarios</h2>")
    assert "2 other scenario(s):" in page


def test_a_store_read_from_outside_is_drawn_from_the_observers_samples() -> None:
    """A pipeline's store: its writer records nothing, driftlab samples it. Each sample
    showing a new value is an arrow from the store to the observer's lane."""

    def sample(t_ms: int, value: str | None) -> dict:
        return _op(t_ms, "observer", "ok", f"r{t_ms}", "cache", value) | {"f": "read"}  # type: ignore[arg-type]

    events = [
        _op(0, "client-1", "invoke", "w1", "source", "A"),
        _op(1, "client-1", "ok", "w1", "source", "A"),
        sample(2, None),
        sample(3, "A"),
        sample(4, "A"),
        _op(5, "client-1", "invoke", "w2", "source", "B"),
        _op(6, "client-1", "ok", "w2", "source", "B"),
        sample(7, "A"),
        _state(20, "source", "B"),
        _state(21, "cache", "A"),
    ]
    d = build_diagram(events, "x", "cache", "stale", "cache holds A", T0 + 21 * MS)
    assert [(a.actor, a.store, a.label, a.outcome) for a in d.arrows] == [
        ("client-1", "source", "set A", "ok"),
        ("observer", "cache", "seen A", "seen"),
        ("client-1", "source", "set B", "ok"),
    ]
    svg = str(render_diagram(d, T0))
    assert ">observer</text>" in svg and "observer seen A in cache at" in svg
