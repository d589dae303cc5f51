"""What can be planted: the anomaly kinds, and the counts a correct checker suite finds
for a plant (a few kinds necessarily show as a second kind too)."""

from __future__ import annotations

from collections.abc import Mapping

from driftlab.checkers.anomaly import ALL_KINDS
from driftlab.checkers.kinds import (
    CONTRADICTORY_ORDER,
    DUPLICATE_DELIVERY,
    NONMONOTONIC_POLL,
    PHANTOM,
    PROJECTION_MISMATCH,
    STALE_OVERWRITE,
)

IMPLIED: dict[str, dict[str, int]] = {
    # An apply of an older version after a newer one reverses the source's order.
    STALE_OVERWRITE: {CONTRADICTORY_ORDER: 1},
    # Polling an offset again delivers its message again.
    NONMONOTONIC_POLL: {DUPLICATE_DELIVERY: 1},
    # A projection value off the fold is also a value the source never held.
    PROJECTION_MISMATCH: {PHANTOM: 1},
}
"""Kinds that a plant of the key kind necessarily shows as well, per planted anomaly."""


def check_plant(plant: Mapping[str, int]) -> dict[str, int]:
    """`plant` for every kind of ALL_KINDS (0 where absent); ValueError on an unknown
    kind or a count that is not a whole number >= 0."""
    unknown = sorted(set(plant) - set(ALL_KINDS))
    if unknown:
        raise ValueError(
            f"cannot plant unknown kind(s) {', '.join(unknown)}; "
            f"the kinds are: {', '.join(ALL_KINDS)}"
        )
    bad = sorted(k for k, n in plant.items() if not isinstance(n, int) or n < 0)
    if bad:
        raise ValueError(f"plant counts must be integers >= 0: {', '.join(bad)}")
    return {k: plant.get(k, 0) for k in ALL_KINDS}


def expected_counts(plant: Mapping[str, int]) -> dict[str, int]:
    """The counts a correct checker suite finds for `plant`: IMPLIED kinds added."""
    counts = check_plant(plant)
    out = dict(counts)
    for kind, extra in IMPLIED.items():
        for other, per in extra.items():
            out[other] += per * counts[kind]
    return out
