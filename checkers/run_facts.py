"""The facts of a run that its verdict needs beyond counts and chances
(checkers.verdict.RunFacts), from its files and the keyed pass's series: nothing here
reads the history again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from checkers.verdict import RunFacts, check_min_chances
from harness.rundir import RunDir

log = logging.getLogger("driftlab.analyze")

NOT_INJECTED = "not injected"
"""How a fault window's error begins when the nemesis could not inject it."""


def run_facts(
    run: RunDir, config: Mapping[str, Any], series: Mapping[str, Any], t_end_s: float
) -> RunFacts:
    """The RunFacts of the run at `run`: its config.json (`config`), the series the
    keyed pass made of its history (`series`: `ops`, `faults`, `bucket_s`) and the time
    its history ends, in seconds since its first event."""
    ops = list(series.get("ops") or [])
    return RunFacts(
        lab_failures=lab_failures(run),
        ran=any(_completions(r) for r in ops),
        faults=fault_lines(
            series.get("faults") or [],
            (config.get("params") or {}).get("faults") or [],
            busy_spans(ops, series.get("latency") or [], int(series.get("bucket_s") or 1)),
            t_end_s,
        ),
        unreadable=[str(line) for line in config.get("unreadable") or []],
        min_chances=check_min_chances(config.get("min_chances")),
    )


def lab_failures(run: RunDir) -> list[dict[str, Any]]:
    """logs/run.json's `lab_failures` (the lab's own failures: a service died, a fault
    could not be injected or healed), each {"service", "at", "what"}; none without it."""
    try:
        summary = json.loads(run.summary.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as e:
        log.warning("%s unreadable (%s): no lab failures read from it", run.summary, e)
        return []
    found = summary.get("lab_failures") if isinstance(summary, dict) else None
    return [f for f in found or [] if isinstance(f, dict)]


def _completions(row: Mapping[str, Any]) -> int:
    return sum(int(row.get(p) or 0) for p in ("ok", "fail", "info"))


def busy_spans(
    ops: Sequence[Mapping[str, Any]], latency: Sequence[Mapping[str, Any]], bucket_s: int
) -> list[tuple[float, float]]:
    """When operations were running, in seconds since the history's first event, from
    series.json's buckets of `bucket_s` seconds: each bucket with a completion (`ops`),
    stretched back by the longest latency of the operations completed there
    (`latency`), so that an operation in flight through a window counts for it."""
    longest: dict[float, float] = {}
    for r in latency:
        t = float(r["t"])
        longest[t] = max(longest.get(t, 0.0), float(r.get("max_ms") or 0.0) / 1e3)
    out = []
    for r in ops:
        if _completions(r) and r.get("t") is not None:
            t = float(r["t"])
            out.append((t - longest.get(t, 0.0), t + bucket_s))
    return out


def _planned(window: Mapping[str, Any]) -> float | None:
    """The planned `at` a series window names (None in older series)."""
    at = window.get("planned_at")
    return None if at is None else float(at)


def fault_lines(
    windows: Sequence[Mapping[str, Any]],
    scheduled: Sequence[Mapping[str, Any]],
    busy: Sequence[tuple[float, float]],
    t_end_s: float,
) -> list[str]:
    """One line per fault window that counts as no chance: a scheduled one that never
    started (the run ended before it) or was not injected, and any that took effect
    while no operation ran. `windows` are series.json's faults, `busy` when operations
    ran (`busy_spans`: the series' buckets are the resolution)."""
    out = []
    started: dict[tuple[Any, Any], list[Mapping[str, Any]]] = {}
    for w in sorted(windows, key=lambda w: float(w.get("start") or 0)):
        started.setdefault((w.get("kind"), w.get("target")), []).append(w)
    # Windows at a time first, each by its planned `at`; a window at a moment has no
    # planned time, and takes one of its kind and target that is left.
    for f in sorted(scheduled, key=lambda f: (f.get("after") is not None, float(f.get("at") or 0))):
        at = float(f.get("at") or 0)
        ids = started.get((f.get("kind"), f.get("target"))) or []
        match = next((w for w in ids if _planned(w) == at), None)
        match = (
            match
            if match is not None or any(_planned(w) is not None for w in ids)
            else (ids[0] if ids else None)
        )
        name = f"{f.get('kind')} {f.get('target')} at {f.get('at')} s"
        if match is None:
            if f.get("after") is not None:
                out.append(
                    f"fault {f.get('kind')} {f.get('target')} at a moment never started"
                    " (its moment never came)"
                )
            else:
                out.append(f"scheduled fault {name} never started (the run ended before it)")
            continue
        ids.remove(match)
        error = match.get("error") or ""
        if error.startswith(NOT_INJECTED):
            out.append(f"scheduled fault {name}: {error}")
    for w in windows:
        if (w.get("error") or "").startswith(NOT_INJECTED) or w.get("start") is None:
            continue
        start = float(w["start"])
        stop = t_end_s if w.get("stop") is None else max(float(w["stop"]), start)
        if not any(first <= stop and last > start for first, last in busy):
            out.append(
                f"fault {w.get('kind')} {w.get('target')} from {start:.1f} s to {stop:.1f} s: "
                "no operation ran while it lasted"
            )
    return out
