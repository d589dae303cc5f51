"""Replay of `outbox`: the CDC driver's steps on the real outbox setup, the same
capture and consumer fed by an outbox table written in the business row's transaction."""

from __future__ import annotations

from harness.architectures.cdc.replay import CdcDriver
from harness.architectures.outbox.setup import Outbox
from harness.setups.base import Setup


class OutboxDriver(CdcDriver):
    """`outbox`: one stepped consumer `g`, as in `cdc`, behind the outbox table."""

    setup_class: type[Setup] = Outbox
