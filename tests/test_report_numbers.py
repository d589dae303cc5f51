"""Every number a reader sees on the pages agrees with the run's own files.

Real runs (dual-write-race, cdc-consumer-crash, and cdc-consumer-crash with no fault,
as `driftlab matrix --schedules none` runs it; and examples/pg_to_redis's planted bug as
a suite of that one pipeline file) on the real stack, analysed by Spark and rendered;
headless Chromium reads the numbers as shown (text, and the charts from their drawn
points and axis ticks), and each is checked against history.parquet, anomalies.parquet,
analysis.json, series.json or logs/run.json, where it comes from. Screenshots go to
test-artifacts/ (git-ignored).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from driftlab.checkers.anomaly import KINDS
from driftlab.harness.app.matrix import Cell, MatrixResult, with_schedule
from driftlab.harness.app.outcome import outcome_of
from driftlab.harness.app.pipeline import scenario_for
from driftlab.harness.app.run import run_scenario
from driftlab.harness.app.suite_index import write_index, write_matrix_outputs
from driftlab.harness.history.schema import LOG_AUDIT
from driftlab.harness.lab.runner.runner import RunResult
from driftlab.reports.run_report import MAX_KEY_EVENTS
from driftlab.scenarios.catalogue.registry import get_scenario
from driftlab.scenarios.pipeline.spec import load

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.browser, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
DURATION_S = 4
BUG = Path(__file__).resolve().parents[1] / "examples" / "pg_to_redis" / "pipeline-bug.toml"


@dataclass
class Runs:
    """The runs folder and each run's result, by scenario."""

    root: Path
    results: dict[str, RunResult]


@pytest.fixture(scope="module")
def runs(stack: object, spark: object, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    root = tmp_path_factory.mktemp("numbers") / "runs"
    dual = get_scenario("dual-write-race").with_overrides(duration=DURATION_S)
    cdc = get_scenario("cdc-consumer-crash").with_overrides(duration=DURATION_S)
    none = with_schedule(cdc, "none")
    assert none is not None
    cells = [Cell(dual, "own", 7), Cell(cdc, "own", 7), Cell(none, "none", 7)]
    matrix = MatrixResult(wall_s=123.4)
    results = {}
    for cell in cells:
        r = run_scenario(cell.scenario, seed=7, runs_dir=root, stack=stack)  # type: ignore[arg-type]
        assert r.error is None and r.verdict is not None, (r.scenario, r.error)
        results[r.scenario] = r
        matrix.outcomes.append((cell, outcome_of(r, cell.scenario)))
    # As `driftlab matrix` leaves the folder: its index (with its wall time), its page.
    write_matrix_outputs(root, matrix, None)
    return Runs(root, results)


@pytest.fixture(scope="module")
def pipeline_run(stack: object, spark: object, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted bug of examples/pg_to_redis run alone, as `driftlab suite --only
    pipeline-bug.toml` leaves its runs folder: its run and a suite page of it alone."""
    root = tmp_path_factory.mktemp("pipelines") / "runs"
    sc = scenario_for(load(BUG), duration=DURATION_S)
    r = run_scenario(sc, seed=3, runs_dir=root, stack=stack)  # type: ignore[arg-type]
    assert r.verdict == "unexpected anomaly", (r.verdict, r.error, r.counts)
    write_index(root, [sc], [r], r.wall_s)
    return Path(r.run_dir)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def _open(browser: Any, page: Path, shot: str) -> Any:
    tab = browser.new_page(viewport={"width": 1200, "height": 900})
    tab.set_default_timeout(3000)  # a page missing an element fails fast
    tab.goto(page.as_uri())
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / f"numbers-{shot}.png"), full_page=True)
    return tab


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _number(text: str) -> float:
    """A number as the pages print it: 1,494 or 1.2k."""
    text = text.replace(",", "").strip()
    return float(text[:-1]) * 1000 if text.endswith("k") else float(text)


def history_operations(run: Path) -> int:
    """Client operations completed, from the history alone: completions of ops whose
    invocation is not a step of another (docs/history.md)."""
    ops = pq.read_table(run / "history.parquet", columns=["type", "phase", "op_id", "extra"])
    ops = ops.filter(pc.equal(ops["type"], "op"))
    steps = {
        op_id
        for op_id, phase, extra in zip(
            ops["op_id"].to_pylist(),
            ops["phase"].to_pylist(),
            ops["extra"].to_pylist(),
            strict=True,
        )
        if phase == "invoke" and extra and "step" in json.loads(extra)
    }
    return sum(
        1
        for op_id, phase in zip(ops["op_id"].to_pylist(), ops["phase"].to_pylist(), strict=True)
        if phase in ("ok", "fail", "info") and op_id not in steps
    )


CHART_JS = """e => ({
  grid: [...e.querySelectorAll('line.grid')].map(l => +l.getAttribute('y1')),
  ylabels: [...e.querySelectorAll('text.yt')].map(t => t.textContent),
  xticks: [...e.querySelectorAll('text.xt')].map(t => [+t.getAttribute('x'), t.textContent]),
  lines: [...e.querySelectorAll('polyline')].map(p => p.getAttribute('points')),
  dots: [...e.querySelectorAll('circle')].map(c => [+c.getAttribute('cx'), +c.getAttribute('cy')]),
  legend: [...e.querySelectorAll('text.lg')].map(t => t.textContent),
})"""
"""What a chart shows: its axes' ticks, its drawn points and its legend."""


def drawn(chart: dict[str, Any]) -> list[tuple[float, float]]:
    """Each drawn point of a chart as (time in s, value), read off its axes' ticks."""
    yticks = list(zip(chart["grid"], map(_number, chart["ylabels"]), strict=True))
    xticks = [(x, _number(label.rstrip("s"))) for x, label in chart["xticks"]]
    (y0, v0), (y1, v1) = yticks[0], yticks[-1]
    (x0, t0), (x1, t1) = xticks[0], xticks[-1]
    points = [
        (float(x), float(y))
        for pts in chart["lines"]
        for x, y in (p.split(",") for p in pts.split())
    ] + [(float(x), float(y)) for x, y in chart["dots"]]
    return [
        (t0 + (x - x0) * (t1 - t0) / (x1 - x0), v0 + (y - y0) * (v1 - v0) / (y1 - y0))
        for x, y in points
    ]


def chart_operations(chart: dict[str, Any], bucket_s: float, t_max: float) -> float:
    """How many operations a throughput chart draws: each drawn point's rate times its
    bucket's width, both read off the axes' ticks (`drawn`)."""
    return sum(rate * min(bucket_s, t_max - (t // bucket_s) * bucket_s) for t, rate in drawn(chart))


def _run_dir(runs: Runs, scenario: str) -> Path:
    return Path(runs.results[scenario].run_dir)


def test_dual_write_race_report_agrees_with_its_files(runs: Runs, browser: Any) -> None:
    run = _run_dir(runs, "dual-write-race")
    summary, analysis = _json(run / "logs" / "run.json"), _json(run / "analysis.json")
    series = _json(run / "series.json")
    page = _open(browser, run / "report.html", "dual-write-race")
    setup = page.locator("#setup").inner_text()
    header_ops = int(re.search(r"runner\s+([\d,]+) op", setup)[1].replace(",", ""))  # type: ignore[index]
    assert header_ops == summary["ops"] == history_operations(run)

    # One word for the verdict: the page's, analysis.json's and logs/run.json's.
    verdict = page.locator("#verdict").inner_text()
    assert verdict == analysis["verdict"] == summary["verdict"]
    assert f"<title>dual-write-race {verdict}:" in (run / "report.html").read_text()

    # The workload's time, behind the rate, ends with its last operation: closing the
    # clients afterwards is not counted (the history's clock, to the millisecond).
    rate = float(page.locator("#runner-rate").inner_text())
    # logs/run.json rounds the time to 10 ms and the rate to 0.1.
    assert rate == summary["ops_per_s"]
    assert rate == pytest.approx(summary["ops"] / summary["workload_s"], rel=0.005)
    history = pq.read_table(run / "history.parquet", columns=["type", "phase", "kind", "time"])
    marks = {
        k: t
        for k, t, ty in zip(
            history["kind"].to_pylist(),
            history["time"].to_pylist(),
            history["type"].to_pylist(),
            strict=True,
        )
        if ty == "mark"
    }
    last_op = max(
        t
        for ty, ph, t in zip(
            history["type"].to_pylist(),
            history["phase"].to_pylist(),
            history["time"].to_pylist(),
            strict=True,
        )
        if ty == "op" and ph in ("ok", "fail", "info")
    )
    span = (last_op - marks["workload-start"]) / 1e9
    assert summary["workload_s"] == pytest.approx(span, abs=0.25), (summary["workload_s"], span)

    # The throughput chart draws as many operations as the header counts.
    chart = page.locator("#series svg.chart").first.evaluate(CHART_JS)
    t_max = (analysis["history"]["t1_ns"] - analysis["history"]["t0_ns"]) / 1e9
    drawn = chart_operations(chart, series["bucket_s"], t_max)
    assert drawn == pytest.approx(header_ops, rel=0.03), (drawn, header_ops)
    # Each line's legend gives its total: they add up to the header's count.
    legend = [re.search(r"\(([\d,]+)\)$", name) for name in chart["legend"]]
    assert sum(int(m[1].replace(",", "")) for m in legend if m) == header_ops

    # No checker is given a time of its own: they run in one pass.
    files = page.locator("#files")
    assert "seconds" not in files.locator("table thead").inner_text()
    assert str(analysis["timings"]["checkers_s"]) in files.locator("#checkers-time").inner_text()

    # Every raw file at its size; an empty log says so.
    for item in files.locator("ul.files li").all():
        href = item.locator("a").get_attribute("href")
        size = int(item.locator(".size").inner_text().replace(",", ""))
        assert size == (run / href).stat().st_size, href
        if href.startswith("logs/") and size == 0:
            assert "empty" in item.inner_text(), href

    # Evidence: the few events that make the anomaly shown, the rest folded, none lost.
    examples = _json(run / "examples.json")["kinds"]
    rows = page.locator("#examples tr.example").all()
    shown = [e for k in examples.values() if k["count"] for e in k["examples"]]
    assert len(rows) == len(shown) > 0
    for row, ex in zip(rows, shown, strict=True):
        open_lines = row.locator("td:last-child > ol.evidence > li").count()
        folded = row.locator("details.more-evidence li").count()
        assert open_lines <= MAX_KEY_EVENTS
        assert open_lines + folded == len(ex["evidence"])
        # The event that makes the anomaly (at its time), when the evidence holds it.
        if any(e.get("time") == ex["time_ns"] for e in ex["evidence"]):
            at = f"{(ex['time_ns'] - analysis['history']['t0_ns']) / 1e9:.6f}s"
            assert at in row.locator("td:last-child > ol.evidence").inner_text(), ex["detail"]
    page.close()


def test_cdc_consumer_crash_report_agrees_with_its_files(runs: Runs, browser: Any) -> None:
    run = _run_dir(runs, "cdc-consumer-crash")
    analysis, config = _json(run / "analysis.json"), _json(run / "config.json")
    t0 = analysis["history"]["t0_ns"]
    history = pq.read_table(run / "history.parquet").to_pylist()
    page = _open(browser, run / "report.html", "cdc-consumer-crash")

    # "Messages delivered again" counts messages, each once however often it came back
    # (as duplicate-delivery does), not repeat deliveries: from the history itself.
    again = [
        int(cell.inner_text())
        for cell in page.locator("#consumers table.data tbody tr td:last-child").all()
    ]
    deliveries = Counter(
        (e["consumer"], e["msg_id"])
        for e in history
        if e["type"] == "msg" and e["action"] == "deliver" and e["consumer"] != LOG_AUDIT
    )
    repeated = [n for n in deliveries.values() if n > 1]
    assert sum(again) == len(repeated) == analysis["counts"]["duplicate-delivery"] > 0
    note = page.locator("#consumers p.note").inner_text()
    assert "each counted once" in note and "a message delivered three times counts one" in note

    # The last offset processed is one below the highest committed, never above what
    # was delivered.
    consumer = page.locator("#consumers h3").first.inner_text().split(" on ")[0]
    committed = max(
        e["offset"] for e in history if e["action"] == "commit" and e["consumer"] == consumer
    )
    delivered = max(
        e["offset"] for e in history if e["action"] == "deliver" and e["consumer"] == consumer
    )
    cells = page.locator("#consumers table.data").first.locator("tbody tr td").all_inner_texts()
    assert [int(cells[1]), int(cells[2])] == [delivered, committed - 1]

    # One row per planned fault, the plan and the observation on the history's clock.
    plan = config["params"]["faults"]
    rows = page.locator("#fault-table tbody tr").all()
    assert len(rows) == len(plan) > 0
    (start_mark,) = [
        e["time"] for e in history if e["type"] == "mark" and e["kind"] == "workload-start"
    ]
    starts = {
        e["fault_id"]: e["time"] for e in history if e["type"] == "fault" and e["phase"] == "start"
    }
    stops = {
        e["fault_id"]: e["time"] for e in history if e["type"] == "fault" and e["phase"] == "stop"
    }
    observed = sorted((starts[f], stops[f]) for f in starts)
    for row, f, (start, stop) in zip(rows, plan, observed, strict=True):
        planned = [
            _number(v) for v in re.findall(r"([\d.]+) s", row.locator("td.planned").inner_text())
        ]
        assert planned[0] == pytest.approx((start_mark - t0) / 1e9 + f["at"], abs=0.006)
        seen = [
            _number(v) for v in re.findall(r"([\d.]+) s", row.locator("td.observed").inner_text())
        ]
        assert seen == pytest.approx([(start - t0) / 1e9, (stop - t0) / 1e9], abs=0.006)
    page.close()


def test_suite_page_counts_claims_and_scenarios_and_describes_variants(
    runs: Runs, browser: Any
) -> None:
    page = _open(browser, runs.root / "index.html", "suite")
    head = page.locator("header").inner_text()
    rows = page.locator("#claims-table tr.scenario-row")
    claims = page.locator("#claims-table tbody.claim")
    assert f"{claims.count()} claims" in head and f"{rows.count()} scenarios" in head
    assert claims.count() == 17 and rows.count() > 17
    for which, n in (("#tally-claims", claims.count()), ("#tally-scenarios", rows.count())):
        counts = re.findall(r"(\d+) (?:[a-z ]+)", page.locator(which).inner_text().split(":", 1)[1])
        assert sum(int(c) for c in counts) == n, which
    # The "without it" half of C12 sits in C12's rows, not among other scenarios.
    assert "event-sourced-no-occ" in page.locator("#claim-C12").inner_text()
    # The header does not call the matrix's time the last suite's.
    assert "last suite" not in head and "last matrix took 123.4 s" in head

    # Each run's verdict as its analysis.json has it (held: every expectation absent).
    for name in ("dual-write-race", "cdc-consumer-crash"):
        analysis = _json(_run_dir(runs, name) / "analysis.json")
        row = rows.filter(has=page.locator(f"a:text-is('{name}')"))
        assert row.locator(".verdict-small").first.inner_text() == analysis["verdict"]

    # A variant is described by the schedule it ran; without its faults, a prediction
    # not shown is no red cross.
    variant = page.locator("#variants-table tbody tr", has_text="cdc-consumer-crash+none")
    config = _json(_run_dir(runs, "cdc-consumer-crash+none") / "config.json")
    assert config["params"]["faults"] == []
    assert variant.locator("td.faults").inner_text() == "no fault"
    assert "SIGKILL" not in variant.inner_text()
    assert "✗" not in variant.locator(".trend").inner_text()
    page.close()


def test_pipeline_report_draws_its_anomalies_where_their_evidence_puts_them(
    pipeline_run: Path, browser: Any
) -> None:
    run = pipeline_run
    analysis, series = _json(run / "analysis.json"), _json(run / "series.json")
    t0, bucket = analysis["history"]["t0_ns"], series["bucket_s"]
    page = _open(browser, run / "report.html", "pipeline-bug")
    assert page.locator("#verdict").inner_text() == analysis["verdict"] == "unexpected anomaly"

    # The anomaly chart draws each anomaly in the bucket of its time in
    # anomalies.parquet (a point within the bucket), as many as the counts say; its
    # title says which time that is.
    chart = page.locator("#series svg.chart[aria-label^='anomalies']")
    title = chart.get_attribute("aria-label") or ""
    assert "a divergence: the final read" in title
    rows = pq.read_table(run / "anomalies.parquet", columns=["kind", "time"]).to_pylist()
    assert len(rows) == sum(analysis["counts"].values()) > 0
    want = Counter(int((r["time"] - t0) / 1e9 // bucket) * bucket for r in rows)
    at: Counter[float] = Counter()
    for t, n in drawn(chart.evaluate(CHART_JS)):
        if round(n):
            at[int(t // bucket) * bucket] += round(n)
    assert at == want, (at, want)

    # The evidence agrees: a divergence is dated by the final read that shows it (the
    # state event at its time); the write the store lacks came earlier, as the
    # evidence's lines show.
    divergence = set(KINDS["divergence"])
    examples = _json(run / "examples.json")["kinds"]
    shown = [e for k, v in examples.items() if k in divergence for e in v["examples"]]
    assert shown
    for ex in shown:
        reads = [e["time"] for e in ex["evidence"] if e["type"] == "state"]
        assert ex["time_ns"] in reads, ex["detail"]
        writes = [e["time"] for e in ex["evidence"] if e["type"] == "op"]
        assert writes and max(writes) < ex["time_ns"], ex["detail"]

    # A pipeline's lag counts only the writes that reached the store, and says so.
    acked = sum(
        1
        for e in pq.read_table(run / "history.parquet", columns=["type", "phase", "f"]).to_pylist()
        if e["type"] == "op" and e["phase"] == "ok" and e["f"] == "write"
    )
    lag_rows = page.locator("#series table.data tbody tr").all()
    for row in lag_rows:
        store, writes = row.locator("td").all_inner_texts()[:2]
        assert _number(writes) == analysis["lag"][store]["count"] <= acked
    if lag_rows:
        assert "is not counted" in page.locator("#lag-note").inner_text()
    # Its chart, which looks healthy during a crash, says so too.
    lag_chart = page.locator("#series svg.chart[aria-label^='replication lag']")
    assert "a write never seen there is not drawn" in (lag_chart.get_attribute("aria-label") or "")
    # No consumer of its own: the page says why rather than that nothing was delivered.
    assert "reads a pipeline's stores from outside" in page.locator("#consumers").inner_text()
    page.close()


def test_a_suite_of_pipeline_files_only_leads_with_them(pipeline_run: Path, browser: Any) -> None:
    root = pipeline_run.parents[1]
    index = _json(root / "index.json")
    page = _open(browser, root / "index.html", "pipelines-suite")
    # The headline counts the pipelines that ran, the failure named, before the claims
    # (none of which ran).
    head = page.locator("#tally").inner_text()
    assert head.startswith("1 scenario(s) of your own: 1 unexpected anomaly"), head
    assert [r["verdict"] for r in index["runs"]] == ["unexpected anomaly"]
    # The user's pipelines lead the page: their table sits above the claims'.
    ours = page.locator("#others-table").bounding_box()
    claims = page.locator("#claims-table").bounding_box()
    assert ours is not None and claims is not None and ours["y"] < claims["y"]
    row = page.locator("#others-table tbody tr", has_text="pg-to-redis-bug")
    assert "unexpected anomaly" in row.inner_text()
    page.close()


def test_analyze_names_the_historys_span_not_its_own_time(runs: Runs) -> None:
    """`driftlab analyze`'s last line: the history's events and the span they cover,
    then the analysis's own time, each named."""
    from typer.testing import CliRunner

    from driftlab.harness.cli import app

    run = _run_dir(runs, "dual-write-race")
    history = pq.read_table(run / "history.parquet", columns=["time"])
    span = (pc.max(history["time"]).as_py() - pc.min(history["time"]).as_py()) / 1e9
    result = CliRunner().invoke(app, ["analyze", str(run)])
    assert result.exit_code == 0, result.output
    line = re.search(r"([\d,]+) events over ([\d.]+) s of history, analysed in", result.output)
    assert line is not None, result.output
    assert int(line[1].replace(",", "")) == history.num_rows
    assert float(line[2]) == pytest.approx(span, abs=0.05)
