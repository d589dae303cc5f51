"""The simulator twin of the outbox architecture: what `driftlab explore` runs."""

from __future__ import annotations

from harness.architectures.cdc.sim import CdcSim, cdc_moves
from harness.explore.spec import SetupSpec, spec

SIMS: tuple[SetupSpec, ...] = (
    spec(
        "outbox",
        "the db row and an outbox row in one transaction, CDC on the outbox "
        "-> log -> idempotent consumer",
        ("C14",),
        CdcSim,
        cdc_moves(2, "cache"),
        partitions=2,
        policy="after-apply",
        channel="outbox",
    ),
)
"""The simulated setups of this architecture."""
