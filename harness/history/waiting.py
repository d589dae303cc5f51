"""Waiting until something holds: the lab's one polling loop, on tenacity.

Retrying an action until it stops raising is tenacity's `Retrying` itself, at its call
site (the CDC consumer's committed offsets, the Kafka reader's watermarks, a send).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import tenacity

T = TypeVar("T")


def wait_until(probe: Callable[[], T], timeout: float, interval: float = 0.1) -> T | None:
    """Call `probe` every `interval` seconds until it returns a truthy value; return it,
    or None once `timeout` seconds have passed. An error of `probe` propagates at once."""
    return tenacity.Retrying(
        stop=tenacity.stop_after_delay(timeout),
        wait=tenacity.wait_fixed(interval),
        retry=tenacity.retry_if_not_result(bool),
        retry_error_callback=lambda _: None,
    )(probe)


def because(last: list[Exception]) -> str:
    """`; last error: ...` for a wait's message, naming the error a probe kept in `last` (it
    catches those it expects before the thing is ready), or nothing when there is none."""
    return f"; last error: {last[-1]}" if last else ""
