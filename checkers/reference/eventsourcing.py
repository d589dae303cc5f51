"""Event sourcing: projections against a replay of the log, and aggregate invariants.

The plain-Python specification of the `eventsourcing` kinds of docs/checkers.md:
`projection-mismatch` and `invariant-violation`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from driftlab.checkers.anomaly import MAX_EVIDENCE, Anomaly, evidence_json
from driftlab.checkers.kinds import INVARIANT_VIOLATION, PROJECTION_MISMATCH
from driftlab.checkers.reference.common import final_states, header_params, order_key
from driftlab.harness.history.schema import Event, EventType, MsgAction

CHECKER = "eventsourcing"
PROJECTION_PREFIX = "projection:"
INTEGER = re.compile(r"[+-]?[0-9]+")
INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, slots=True)
class Bounds:
    """The invariant of every aggregate's running sum (`params.invariant`)."""

    low: int | None = None
    high: int | None = None

    def broken_by(self, total: int, delta: int) -> bool:
        """Whether an event moved the running sum out of bounds or further out: the
        event a validation before appending would have refused."""
        below = self.low is not None and total < self.low and delta < 0
        above = self.high is not None and total > self.high and delta > 0
        return below or above


def is_log_event(e: Event) -> bool:
    """An event-sourcing event: appended to a channel named `events` or `events:*`."""
    return (
        e.type == EventType.MSG
        and e.action == MsgAction.PRODUCE
        and e.key is not None
        and e.channel is not None
        and (e.channel == "events" or e.channel.startswith("events:"))
    )


def as_int(text: str | None) -> int | None:
    """The integer a text spells (signed decimal digits, 64-bit), else None."""
    if text is None or not INTEGER.fullmatch(text):
        return None
    n = int(text)
    return n if INT64[0] <= n <= INT64[1] else None


def bounds(headers: Iterable[Event]) -> Bounds | None:
    """The invariant of the first header (time order) that gives one, if any.

    Raises ValueError naming the fix when `params.invariant` is malformed.
    """
    for params in header_params(headers):
        invariant = params.get("invariant")
        if invariant is None:
            continue
        limits = invariant if isinstance(invariant, dict) else {}
        low, high = limits.get("min"), limits.get("max")
        if (
            not limits
            or set(limits) - {"min", "max"}
            or any(
                v is not None and (not isinstance(v, int) or isinstance(v, bool))
                for v in (low, high)
            )
        ):
            raise ValueError(
                f"params.invariant must be like {{'min': 0}} or {{'max': 10}} with integer "
                f"bounds, got {invariant!r}: fix the scenario's params"
            )
        return Bounds(low, high)
    return None


def check(events: Sequence[Event]) -> list[Anomaly]:
    """Projection mismatches against the fold of the log, then invariant violations."""
    return check_keys(events, (), bounds(events))


def check_keys(
    events: Sequence[Event], state_stores: Iterable[str], limits: Bounds | None
) -> list[Anomaly]:
    """check() of some keys: `events` hold every event of each, `state_stores` are the
    stores with a `state` event anywhere in the history, `limits` its bounds()."""
    log: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if is_log_event(e):
            log[e.key].append(e)
    return _mismatches(events, log, state_stores) + _violations(limits, log)


def _mismatches(
    events: Sequence[Event], log: dict[str, list[Event]], state_stores: Iterable[str] | None
) -> list[Anomaly]:
    """Projection stores whose final value of an aggregate is not the fold of its events.

    An aggregate with events that the projection lacks is a mismatch too: a replay
    writes every aggregate it meets.
    """
    states = final_states(events)
    for store in state_stores:
        states.setdefault(store, {})
    out: list[Anomaly] = []
    for store, held in sorted(states.items()):
        if not store.startswith(PROJECTION_PREFIX):
            continue
        for key in sorted(held.keys() | log.keys()):
            appended = sorted(log.get(key, []), key=order_key)
            fold = sum(as_int(e.value) or 0 for e in appended)
            final = held.get(key)
            if final is not None and as_int(final.value) == fold:
                continue
            shown = repr(final.value) if final is not None else "nothing"
            detail = (
                f"{store} holds {shown} for {key!r}, the fold of its "
                f"{len(appended)} events is {fold}"
            )
            time = final.time if final is not None else appended[-1].time
            finals = [final] if final is not None else []
            evidence = finals + appended[-(MAX_EVIDENCE - len(finals)) :]
            out.append(
                Anomaly(
                    CHECKER,
                    PROJECTION_MISMATCH,
                    store,
                    key,
                    None,
                    time,
                    detail,
                    evidence_json(evidence),
                )
            )
    return out


def _violations(limits: Bounds | None, log: dict[str, list[Event]]) -> list[Anomaly]:
    """Events that, in version order per aggregate, broke the invariant."""
    if limits is None:
        return []
    out: list[Anomaly] = []
    for key in sorted(log):
        total = 0
        for e in sorted(log[key], key=_version_order):
            delta = as_int(e.value) or 0
            total += delta
            if limits.broken_by(total, delta):
                detail = (
                    f"{key!r} reached {total} with {e.value} at version {e.version} "
                    f"(bounds min={limits.low}, max={limits.high})"
                )
                out.append(
                    Anomaly(
                        CHECKER,
                        INVARIANT_VIOLATION,
                        None,
                        key,
                        None,
                        e.time,
                        detail,
                        evidence_json([e]),
                    )
                )
    return out


def _version_order(e: Event) -> tuple[bool, int, tuple[int, bool, str, bool, int]]:
    """Version order, unversioned first (as Spark sorts nulls), then time order."""
    return (e.version is not None, e.version or 0, order_key(e))
