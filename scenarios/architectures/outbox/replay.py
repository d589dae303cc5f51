"""Replay of `outbox`: the CDC driver's steps on the real outbox setup, the same
capture and consumer fed by an outbox table written in the business row's transaction."""

from __future__ import annotations

from driftlab.harness.lab.setups.base import Setup
from driftlab.scenarios.architectures.cdc.replay import CdcDriver
from driftlab.scenarios.architectures.outbox.setup import Outbox


class OutboxDriver(CdcDriver):
    """`outbox`: one stepped consumer `g`, as in `cdc`, behind the outbox table."""

    setup_class: type[Setup] = Outbox
