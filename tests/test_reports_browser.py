"""The run report and the suite page as a person sees them, in headless Chromium.

One synthetic run with planted anomalies is analysed for real (Spark) and rendered;
Debian's /usr/bin/chromium opens it through Playwright. Screenshots go to
test-artifacts/ (git-ignored) for a human to look at.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from driftlab.checkers.anomaly import ALL_KINDS
from driftlab.harness.lab.testing.synthetic import expected_counts, generate_history

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
MAX_REPORT_BYTES = 10 * 1024 * 1024


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, spark: object) -> Path:
    """runs/synthetic/<run>/ analysed and rendered, and the suite page of runs/."""
    from driftlab.checkers.analyze import analyze
    from driftlab.reports.run_report import render_run_report
    from driftlab.reports.suite_page import render_suite

    root = tmp_path_factory.mktemp("runs")
    run = root / "synthetic" / "20260101T000000Z-5"
    plant = {kind: 2 for kind in ALL_KINDS}
    expect = {k: "present" for k, n in expected_counts(plant).items() if n}
    generate_history(run, events=5_000, seed=5, plant=plant, expectations=expect)
    analyze(run)
    render_run_report(run)
    render_suite(root)
    return root


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """One headless Chromium for the module."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _open(browser: object, path: Path) -> tuple[object, list[str]]:
    page = browser.new_page(viewport={"width": 1200, "height": 900})  # type: ignore[attr-defined]
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    return page, errors


def test_run_report_shows_verdict_summary_diagrams_and_fault_windows(
    runs: Path, browser: object
) -> None:
    report = next(runs.glob("synthetic/*/report.html"))
    assert report.stat().st_size < MAX_REPORT_BYTES
    page, errors = _open(browser, report)
    assert page.locator("#verdict").inner_text() == "reproduced"
    summary = page.locator("#summary-table")
    assert summary.is_visible()
    for label in (
        "lost",
        "duplicate",
        "reorder",
        "divergence",
        "stale read",
        "invariant violation",
        "contradictory order",
    ):
        header = summary.locator("tbody th", has_text=label)
        assert header.count() == 1
        assert header.locator(".count").inner_text().replace(",", "").isdigit()
    stale_row = summary.locator("tr", has_text="stale-overwrite")
    count, chances = stale_row.locator("td.num").all_inner_texts()
    assert count == "2" and int(chances.replace(",", "")) >= 2
    diagrams = page.locator("svg.seq")
    assert diagrams.count() >= 1
    assert diagrams.first.locator("g.write").count() >= 2
    assert diagrams.first.locator("g.final").count() >= 1
    windows = page.locator("#series svg.chart g.fault-window")
    assert windows.count() >= 3
    assert "partition" in (windows.first.text_content() or "")
    assert page.locator("#consumers svg.chart").count() >= 1
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "run-report.png"), full_page=True)
    assert errors == []
    page.close()


def test_text_filter_narrows_the_examples(runs: Path, browser: object) -> None:
    page, errors = _open(browser, next(runs.glob("synthetic/*/report.html")))
    rows = page.locator("tr.example")
    total = rows.count()
    assert total > 10
    key = page.locator("tr.example td:nth-child(3)").filter(has_text="acct").first.inner_text()
    page.fill("#filter", key)
    visible = page.locator("tr.example:visible")
    assert 0 < visible.count() < total
    assert all(key in visible.nth(i).inner_text() for i in range(visible.count()))
    assert page.locator("#filter-count").inner_text().endswith("examples match")
    page.fill("#filter", "")
    assert page.locator("tr.example:visible").count() == total
    assert errors == []
    page.close()


def test_raw_file_links_resolve(runs: Path, browser: object) -> None:
    report = next(runs.glob("synthetic/*/report.html"))
    page, _ = _open(browser, report)
    hrefs = page.locator("#files a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert "analysis.json" in hrefs and "history.parquet" in hrefs
    assert all((report.parent / h).is_file() for h in hrefs)
    page.close()


def test_suite_page_links_each_claim_to_its_report(runs: Path, browser: object) -> None:
    page, errors = _open(browser, runs / "index.html")
    assert page.locator("#claims-table tbody.claim").count() == 17
    other = page.locator("#others-table tbody tr", has_text="synthetic")
    assert "reproduced" in other.inner_text()
    other.locator("a").first.click()
    page.wait_for_load_state()
    assert page.url.endswith("/report.html")
    assert page.locator("#verdict").inner_text() == "reproduced"
    page.go_back()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "suite-page.png"), full_page=True)
    assert errors == []
    page.close()


def test_report_command_rerenders_a_run(runs: Path) -> None:
    from typer.testing import CliRunner

    from driftlab.harness.cli import app

    report = next(runs.glob("synthetic/*/report.html"))
    report.unlink()
    result = CliRunner().invoke(app, ["report", str(report.parent)])
    assert result.exit_code == 0, result.output
    assert report.is_file() and str(report) in result.output
    assert 'id="verdict"' in report.read_text()


def test_report_renders_without_series_or_examples(
    runs: Path, browser: object, tmp_path: Path
) -> None:
    """An analysis whose optional outputs are gone still gives a readable report."""
    from driftlab.reports.run_report import render_run_report

    src = next(runs.glob("synthetic/*"))
    bare = tmp_path / src.name
    bare.mkdir()
    for name in ("config.json", "analysis.json"):
        shutil.copy(src / name, bare / name)
    page, errors = _open(browser, render_run_report(bare))
    assert page.locator("#verdict").inner_text() == "reproduced"
    assert "No diverged key to draw" in page.locator("#diagrams").inner_text()
    assert errors == []
    page.close()
