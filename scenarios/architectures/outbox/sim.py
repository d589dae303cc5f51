"""The simulator twin of the outbox architecture: what `driftlab explore` runs."""

from __future__ import annotations

from driftlab.harness.lab.explore.spec import SetupSpec
from driftlab.scenarios.architectures.cdc.sim import cdc_spec

SIMS: tuple[SetupSpec, ...] = (
    cdc_spec(
        "outbox",
        "the db row and an outbox row in one transaction, CDC on the outbox "
        "-> log -> idempotent consumer",
        ("C14",),
        policy="after-apply",
        channel="outbox",
    ),
)
"""The simulated setups of this architecture: the CDC pipeline fed by the outbox."""
