"""driftlab's sightings of a store it samples from outside (the OBSERVER's `ok` reads
of a pipeline's stores) are judged as arrivals: the lag runs from a write's `ok` to its
first sighting, and a store seen at an older version after a newer one is a
stale-overwrite. A client's reads are neither."""

from __future__ import annotations

from strategies_states import read, write

from driftlab.checkers.coverage import chances
from driftlab.checkers.reference import reorder, staleness
from driftlab.harness.history.schema import OBSERVER, Event

MS = 1_000_000


def sightings(process: str) -> list[Event]:
    """Three writes of k at the source; the mirror seen at v1, v3, then v2 again."""
    events = [write(t * MS, "k", f"v{t}", t) for t in (1, 2, 3)]
    for i, (at, value, version) in enumerate([(5, "v1", 1), (9, "v3", 3), (20, "v2", 2)]):
        events += read(at * MS, (at + 1) * MS, process, "mirror", "k", value, f"o{i}", version)
    return events


def test_an_older_version_seen_after_a_newer_is_a_stale_overwrite() -> None:
    found = reorder.check(sightings(OBSERVER))
    assert [(a.kind, a.store, a.key) for a in found] == [("stale-overwrite", "mirror", "k")]
    assert "version 2 applied after version 3" in found[0].detail
    assert chances(sightings(OBSERVER))["stale-overwrite"] == 2
    # A client's reads are its own business: readers, not the store's record.
    assert reorder.check(sightings("p1")) == []
    assert chances(sightings("p1"))["stale-overwrite"] == 0


def test_the_lag_runs_from_the_write_to_its_first_sighting() -> None:
    lag = staleness.lag_rows(sightings(OBSERVER))
    # v1 written at 1 ms, first seen (the read's ok) at 6 ms; v3 at 3 ms, seen at 10 ms;
    # v2 first seen at 21 ms.
    assert sorted(lag) == [
        ("mirror", 1 * MS, 5 * MS),
        ("mirror", 2 * MS, 19 * MS),
        ("mirror", 3 * MS, 7 * MS),
    ]
    assert staleness.lag_rows(sightings("p1")) == []
