"""The synthetic history generator: valid, deterministic, and its planted counts are what
the plain-Python reference checkers find (the Spark side is tests/test_analyze.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pytest
from reference_counts import reference_anomalies

from driftlab.checkers.anomaly import ALL_KINDS
from driftlab.harness.history.reader import SORT_KEYS, read_history
from driftlab.harness.lab.testing.synthetic import IMPLIED, expected_counts, generate_history

PLANT = {kind: 3 for kind in ALL_KINDS}


def _reference_counts(run: Path) -> dict[str, int]:
    """Every kind's count, as the reference checkers find them."""
    counts = Counter(a.kind for a in reference_anomalies(run))
    return {k: counts[k] for k in ALL_KINDS}


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    run = tmp_path_factory.mktemp("syn") / "planted"
    return run, generate_history(run, events=15_000, seed=3, plant=PLANT)


def test_reference_checkers_find_the_planted_counts(
    planted: tuple[Path, dict[str, int]],
) -> None:
    run, expected = planted
    assert _reference_counts(run) == expected


def test_clean_history_has_no_anomaly(tmp_path: Path) -> None:
    run = tmp_path / "clean"
    assert generate_history(run, events=8_000, seed=4) == {k: 0 for k in ALL_KINDS}
    assert _reference_counts(run) == {k: 0 for k in ALL_KINDS}


def test_expected_counts_add_implied_kinds() -> None:
    counts = expected_counts({"stale-overwrite": 2, "contradictory-order": 1})
    assert counts["stale-overwrite"] == 2
    assert (
        counts["contradictory-order"] == 1 + 2 * IMPLIED["stale-overwrite"]["contradictory-order"]
    )
    assert set(counts) == set(ALL_KINDS)


def test_history_is_valid_and_shaped_like_a_run(planted: tuple[Path, dict[str, int]]) -> None:
    run, _ = planted
    history = read_history(run)
    table = history.table
    assert history.info.complete and not history.info.cut_short
    assert 14_000 < history.info.events < 16_500
    config = json.loads((run / "config.json").read_text())
    assert config["scenario"] == "synthetic" and config["seed"] == 3
    pairs = zip(table.column("type").to_pylist(), table.column("action").to_pylist(), strict=True)
    kinds = Counter(pairs)
    for needed in [
        ("op", None),
        ("msg", "produce"),
        ("msg", "deliver"),
        ("msg", "apply"),
        ("msg", "commit"),
        ("fault", None),
        ("state", None),
        ("mark", None),
    ]:
        assert kinds[needed] > 0, needed
    times = table.column("time").to_pylist()
    assert times == sorted(times)
    marks = table.filter(pc.equal(table.column("type"), "mark")).column("kind").to_pylist()
    assert marks[-1] == "end" and "quiesced" in marks


def test_same_seed_same_history_in_both_formats(tmp_path: Path) -> None:
    a = generate_history(tmp_path / "a", events=3_000, seed=9, plant={"poll-skip": 1})
    b = generate_history(tmp_path / "b", events=3_000, seed=9, plant={"poll-skip": 1}, jsonl=True)
    assert a == b
    ta = read_history(tmp_path / "a").table.sort_by(SORT_KEYS)
    tb = read_history(tmp_path / "b").table.sort_by(SORT_KEYS)
    assert ta.equals(tb)
    c = generate_history(tmp_path / "c", events=3_000, seed=10, plant={"poll-skip": 1})
    assert a == c
    assert not read_history(tmp_path / "c").table.sort_by(SORT_KEYS).equals(ta)


def test_cut_short_has_no_end_mark(tmp_path: Path) -> None:
    generate_history(tmp_path / "r", events=2_000, seed=1, cut_short=True)
    info = read_history(tmp_path / "r").info
    assert info.cut_short and not info.complete


def test_bad_plant_is_refused_with_the_kinds() -> None:
    with pytest.raises(ValueError, match="lost-message"):
        generate_history("/nonexistent/never-written", plant={"lost-messages": 1})
    with pytest.raises(ValueError, match="integers >= 0"):
        generate_history("/nonexistent/never-written", plant={"lost-message": -1})
    with pytest.raises(ValueError, match="raise `events`"):
        generate_history("/nonexistent/never-written", events=1_000, plant={"missing": 500})
