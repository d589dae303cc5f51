"""Waiting until something holds: the lab's one polling loop, on tenacity.

Most of the lab's waits have the same shape: ask something every so often (a port, a
REST status, a process's status file, a consumer's position) until it answers yes, or
give up at a deadline with a message naming what was awaited. `wait_until` is that loop;
tenacity keeps the clock, the pauses and the stop conditions (a deadline, a stop event),
so each call site only says what it waits for and what to say when it never comes.
Retrying an action until it stops raising is tenacity's `Retrying` itself (the CDC
consumer's committed offsets, the Kafka reader's watermarks, a direct message's send).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

import tenacity

T = TypeVar("T")

Retried = type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]


def because(last: BaseException | None) -> str:
    """`; last error: ...` for a message about a wait, or nothing when there was none."""
    return f"; last error: {last}" if last else ""


def wait_until(
    probe: Callable[[], T],
    timeout: float,
    *,
    interval: float = 0.1,
    retry_on: Retried = (),
    abort: Callable[[BaseException | None], BaseException | None] | None = None,
    fail: Callable[[BaseException | None], BaseException] | None = None,
    stop: threading.Event | None = None,
) -> T | None:
    """Call `probe` every `interval` seconds until it returns a truthy value; return it.

    An exception of `retry_on` (its types, or those it says yes to) from the probe means
    "not yet" (the last one is kept); any other propagates at once. `abort`, asked
    before each probe with the last error, ends the wait by raising what it returns (a
    process that exited will never be ready). When `timeout` has passed, or `stop` is
    set (the pauses wait on it, so a stop cuts one short): None, or with `fail`, raises
    `fail(last error)`.
    """
    last: list[BaseException | None] = [None]

    def before(_: tenacity.RetryCallState) -> None:
        if abort is not None and (problem := abort(last[0])) is not None:
            raise problem

    def after(state: tenacity.RetryCallState) -> None:
        if state.outcome is not None and state.outcome.failed:
            last[0] = state.outcome.exception()

    def gave_up(_: tenacity.RetryCallState) -> None:
        if fail is not None:
            raise fail(last[0])

    ends: tenacity.stop.stop_base = tenacity.stop_after_delay(timeout)
    if stop is not None:
        ends = ends | tenacity.stop_when_event_set(stop)
    retrying = tenacity.Retrying(
        sleep=time.sleep if stop is None else stop.wait,
        stop=ends,
        wait=tenacity.wait_fixed(interval),
        retry=_not_yet(retry_on) | tenacity.retry_if_result(_no),
        before=before,
        after=after,
        retry_error_callback=gave_up,
    )
    return retrying(probe)


def _not_yet(retry_on: Retried) -> tenacity.retry_base:
    if isinstance(retry_on, type | tuple):
        return tenacity.retry_if_exception_type(retry_on)
    return tenacity.retry_if_exception(retry_on)


def _no(result: object) -> bool:
    return not result
