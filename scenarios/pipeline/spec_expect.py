"""The [[faults]], [expect] and [workload] sections of a pipeline file."""

from __future__ import annotations

from typing import Any

from driftlab.checkers import kinds as kind_table
from driftlab.harness.lab.nemesis.schedule import Anchor, FaultSpec, Schedule
from driftlab.harness.lab.workload.spec import WorkloadSpec
from driftlab.scenarios.pipeline.spec_fields import PipelineError, spec_error
from driftlab.scenarios.pipeline.spec_model import EXTERNAL_UNLINKED, Expect
from driftlab.scenarios.pipeline.spec_sections import StoreSpec


def parse_faults(
    raw: tuple[Any, ...],
    recovery: float,
    processes: tuple[str, ...],
    services: tuple[str, ...],
    own: tuple[str, ...],
    mirrors: tuple[str, ...] = (),
) -> Schedule:
    """The `[[faults]]` schedule, each target checked against the pipeline's processes
    and services, each moment (`after`) against its processes and `mirrors` (its
    stores read as mirrors)."""
    windows = []
    for i, f in enumerate(raw):
        where = f"faults[{i}]"
        if not isinstance(f, dict):
            raise spec_error(where, "is not a table", "write [[faults]] with kind, target, at")
        try:
            spec = FaultSpec.from_dict(f)
        except (ValueError, TypeError) as exc:
            raise PipelineError(f"{where}: {exc}") from None
        if spec.kind in ("app-crash", "slow-consumer"):
            raise spec_error(
                f"{where}.kind",
                f"{spec.kind} acts on driftlab's own code",
                "use crash, pause, cut, ...",
            )
        if spec.kind in ("crash", "pause", "restart"):
            ok = spec.target in processes or spec.target in own
            fix = f"name a process or a service driftlab runs: {', '.join(processes + own)}"
        else:
            client, _, svc = spec.target.rpartition("->")
            # The Connect worker's own links (connect->postgres) when it runs connectors.
            clients = ("", "app", *processes, *(("connect",) if "connect" in services else ()))
            ok = svc in services and client in clients
            fix = (
                "name a service (the workload's link) or a process's link "
                f"such as {processes[0] if processes else 'app'}->{services[-1]}"
            )
            if ok and svc in EXTERNAL_UNLINKED and svc not in own:
                raise spec_error(
                    f"{where}.target",
                    f"{spec.target!r} is an external {svc}, reached with no link (its "
                    "brokers advertise their own addresses, which a link cannot rewrite)",
                    f'fault another link, or use driftlab\'s {svc} (services = ["{svc}"])',
                )
        if not ok:
            raise spec_error(f"{where}.target", f"{spec.target!r} is not in this pipeline", fix)
        if spec.after is not None:
            _check_moment(where, spec.after, processes, mirrors)
        windows.append(spec)
    schedule = Schedule(tuple(windows), recovery)
    try:
        schedule.validate()
    except ValueError as exc:
        raise PipelineError(f"faults: {exc}") from None
    return schedule


def _check_moment(
    where: str, after: Anchor, processes: tuple[str, ...], mirrors: tuple[str, ...]
) -> None:
    """A moment names one of the pipeline's processes (ready) or mirror stores (lag,
    caught_up)."""
    if after.event == "ready" and after.subject not in processes:
        raise spec_error(
            f"{where}.after.ready",
            f"{after.subject!r} is not a process of this pipeline",
            f"name one of: {', '.join(processes) or '(none: add a [processes.x])'}",
        )
    if after.event in ("lag", "caught_up") and after.subject not in mirrors:
        raise spec_error(
            f"{where}.after.{after.event}",
            f"{after.subject!r} is not a store read as a mirror (a log store has no lag)",
            f"name one of: {', '.join(mirrors) or '(none)'}",
        )


_UNSEEN_FROM_OUTSIDE = {
    kind: "it is judged from a broker's sends and deliveries"
    for kind in kind_table.names(from_broker=True)
}
"""Kinds a pipeline run never has a chance to find: driftlab reads a pipeline's stores
from outside and records no writes or broker traffic of its programs, so naming one
would only end every run inconclusive."""

VERSIONED_KINDS = kind_table.names(store_versions=True)
"""Kinds judged from the versions a store shows (a key seen at version 5, later at 3):
a pipeline may name them only when one of its stores is read with a version."""


def parse_expectations(exp: Expect, stores: tuple[StoreSpec, ...]) -> dict[str, str]:
    """`[expect]`: the anomaly kinds that must be present or absent, each one a
    pipeline run can find."""
    from driftlab.checkers.anomaly import ALL_KINDS

    out: dict[str, str] = {}
    for want in ("present", "absent"):
        for kind in getattr(exp, want):
            if kind not in ALL_KINDS:
                raise spec_error(
                    f"expect.{want}",
                    f"{kind!r} is not an anomaly kind",
                    f"use: {', '.join(ALL_KINDS)}",
                )
            if kind in _UNSEEN_FROM_OUTSIDE:
                raise spec_error(
                    f"expect.{want}",
                    f"{kind!r} cannot be judged on a pipeline: {_UNSEEN_FROM_OUTSIDE[kind]},"
                    " which driftlab does not see from outside your programs",
                    "remove it (missing, stale, phantom, extra, a log store's lost-write and"
                    " duplicate-apply, and with versions stale-overwrite are judged;"
                    " docs/pipelines.md)",
                )
            if kind in VERSIONED_KINDS and all(s.versioned is False for s in stores):
                raise spec_error(
                    f"expect.{want}",
                    f"{kind!r} is judged from the versions a store shows, and no store is"
                    " read with one",
                    "give a store's version: redis version_field, kafka or http"
                    " version_field, or a sql query's third column",
                )
            out[kind] = want
    return out


def parse_workload(data: dict[str, Any]) -> WorkloadSpec:
    """`[workload]`: driftlab's writes to the source (writes only, uniform keys,
    100/s unless said)."""
    try:
        return WorkloadSpec.from_dict(
            {"mix": {"write": 1.0}, "distribution": "uniform", "rate": 100.0, **data}
        )
    except (ValueError, TypeError) as exc:
        raise PipelineError(f"workload: {exc}") from None
