"""Snapshot-then-stream scenarios: claim C10 (a new view started from a snapshot and the
stream from the snapshot's own position converges) and its planted variant (the stream
started at a later offset than the snapshot covers loses the changes in between)."""

from __future__ import annotations

from driftlab.checkers.kinds import (
    LOST_MESSAGE,
    LOST_WRITE,
    PHANTOM,
    POLL_SKIP,
    STALE,
    STALE_OVERWRITE,
)
from driftlab.harness.lab.scenario import CONVERGES, Scenario, expect
from driftlab.harness.lab.workload.spec import WorkloadSpec

# Ten hot keys at a time, moving on every second: a key written only before the view
# joined keeps, in a misaligned view, the value of the snapshot.
ROTATING = WorkloadSpec(
    clients=4, keys=10, distribution="uniform", rate=100, duration=10, rotate_s=1.0
)

PARAMS = {"preload": 100, "join_s": 3.0}

SCENARIOS = [
    Scenario(
        name="snapshot-then-stream",
        claim="C10",
        setup="snapshot-stream",
        summary=(
            "100 rows are loaded, then Debezium takes its initial snapshot at the position "
            "of its new replication slot and streams every later commit into one topic. A "
            "new Redis view joins 3 s into the workload, loads the snapshot's records and "
            "applies the stream from the offset right after them: it converges."
        ),
        setup_params={**PARAMS, "align": True},
        workload=ROTATING,
        expectations=expect(absent=[*CONVERGES, POLL_SKIP]),
    ),
    Scenario(
        name="snapshot-misaligned",
        claim="C10-misaligned",
        setup="snapshot-stream",
        summary=(
            "The planted bug: the same view loads the snapshot, then subscribes to the "
            "stream at the end of the log (where it is when it joins) instead of the "
            "snapshot's position. The changes committed in between never reach it: keys "
            "last written then keep their snapshot values."
        ),
        setup_params={**PARAMS, "align": False},
        workload=ROTATING,
        expectations=expect(
            present=[LOST_WRITE, LOST_MESSAGE, STALE], absent=[PHANTOM, STALE_OVERWRITE]
        ),
    ),
]
