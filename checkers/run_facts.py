"""The facts of a run that its verdict needs beyond counts and chances
(driftlab.checkers.verdict.RunFacts), from its files and the keyed pass's series: nothing here
reads the history again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from driftlab.checkers.verdict import RunFacts, check_min_chances
from driftlab.harness.history.rundir import RunDir, RunSummary

NOT_INJECTED = "not injected"
"""How a fault window's error begins when the nemesis could not inject it."""

SLIP_FLOOR_S = 2.0
SLIP_SHARE = 0.5
"""A fault window slipped when it lasted longer than planned by more than
max(SLIP_FLOOR_S, SLIP_SHARE x its planned duration): the heal of a crash waits for
the process to run again, a second or two on an idle machine (so a 0.5 s crash lasts
2 s), ten times that under load."""


def run_facts(
    run: RunDir, config: Mapping[str, Any], series: Mapping[str, Any], t_end_s: float
) -> RunFacts:
    """The RunFacts of the run at `run`: its config.json (`config`), the series the
    keyed pass made of its history (`series`: `ops`, `faults`, `bucket_s`) and the time
    its history ends, in seconds since its first event."""
    ops = list(series.get("ops") or [])
    windows = series.get("faults") or []
    recorded = summary_facts(run)
    return replace(
        recorded,
        ran=any(_completions(r) for r in ops),
        faults=fault_lines(
            windows,
            (config.get("params") or {}).get("faults") or [],
            busy_spans(ops, series.get("latency") or [], int(series.get("bucket_s") or 1)),
            t_end_s,
        ),
        slipped=slip_lines(windows, t_end_s),
        unreadable=[str(line) for line in config.get("unreadable") or []]
        + list(recorded.unreadable),
        min_chances=check_min_chances(config.get("min_chances")),
    )


def summary_facts(run: RunDir) -> RunFacts:
    """The facts logs/run.json holds (driftlab.harness.history.rundir): the lab's own
    failures (a service died, a fault could not be injected or healed) and what the
    run's setup found of the system under test (stores that did not converge,
    processes that did not come back, stores the final reading could not read); none
    without the file."""
    summary = RunSummary.read(run.summary) or RunSummary()
    return RunFacts(
        lab_failures=summary.lab_failures,
        not_converged=[d.line for d in summary.not_converged],
        not_back=list(summary.not_back),
        unreadable=[
            f"store {name} could not be read at the final reading ({why}); fix how it is read"
            for name, why in sorted(summary.unreadable_stores.items())
        ],
    )


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


def fault_lines(
    windows: Sequence[Mapping[str, Any]],
    scheduled: Sequence[Mapping[str, Any]],
    busy: Sequence[tuple[float, float]],
    t_end_s: float,
) -> list[str]:
    """One line per fault window that counts as no chance: a scheduled one that never
    started or was not injected, a `when: busy` crash that struck its target idle
    (`idle`), and any that took effect while no operation ran.
    `windows` are series.json's faults, `scheduled` config.json's (`at`, and `after`
    for one at a moment), `busy` when operations ran (`busy_spans`: the series' buckets
    are the resolution)."""
    out = []
    started: dict[tuple[Any, Any], list[Mapping[str, Any]]] = {}
    for w in sorted(windows, key=lambda w: float(w.get("start") or 0)):
        started.setdefault((w.get("kind"), w.get("target")), []).append(w)
    # Windows at a time first, each told by its planned `at`; then those at a moment.
    for f in sorted(scheduled, key=lambda f: (_anchor(f) is not None, float(f.get("at") or 0))):
        name = f"{f.get('kind')} {f.get('target')} {_planned_moment(f)}"
        opened = started.get((f.get("kind"), f.get("target"))) or []
        window = _opened_by(f, opened)
        if window is None:
            out.append(f"scheduled fault {name} never started ({_why_never(f)})")
            continue
        opened.remove(window)
        error = window.get("error") or ""
        if error.startswith(NOT_INJECTED):
            out.append(f"scheduled fault {name}: {error}")
    for w in windows:
        if (w.get("error") or "").startswith(NOT_INJECTED) or w.get("start") is None:
            continue
        start = float(w["start"])
        stop = t_end_s if w.get("stop") is None else max(float(w["stop"]), start)
        if w.get("idle"):
            out.append(
                f"fault {w.get('kind')} {w.get('target')} at {start:.1f} s struck its target "
                "while it was not busy (its wait ran out): it cut no work short"
            )
        if not any(first <= stop and last > start for first, last in busy):
            out.append(
                f"fault {w.get('kind')} {w.get('target')} from {start:.1f} s to {stop:.1f} s: "
                "no operation ran while it lasted"
            )
    return out


def _opened_by(
    fault: Mapping[str, Any], opened: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The window the scheduled `fault` opened among those of its kind and target: the
    one whose start names its planned `at` (series.json's `planned_at`), at a moment
    (`after`) as the fault is; in an older series without them, the first left, since
    windows of a kind on a target open in the order of their planned times."""
    at, at_moment = float(fault.get("at") or 0.0), _anchor(fault) is not None
    for w in opened:
        planned = w.get("planned_at")
        same = planned is not None and abs(float(planned) - at) < 1e-6
        if same and bool(w.get("after")) == at_moment:
            return w
    if any(w.get("planned_at") is not None for w in opened):
        return None
    return opened[0] if opened else None


def _anchor(fault: Mapping[str, Any]) -> Any:
    """The moment a scheduled fault waits for (config.json's `after`: the fields of
    driftlab.harness.lab.nemesis.schedule.Anchor), None for one at a time after the workload's
    start."""
    return fault.get("after")


def _planned_moment(fault: Mapping[str, Any]) -> str:
    """When a scheduled fault was planned, in words."""
    at = float(fault.get("at") or 0.0)
    after = _anchor(fault)
    if after is None:
        return f"at {at:g} s"
    if isinstance(after, Mapping):
        # The Anchor's fields (driftlab.harness.lab.nemesis.schedule, a layer above the checkers).
        nth = int(after.get("nth") or 1)
        after = f"{after.get('event')} {after.get('subject') or ''}".strip() + (
            f" (occurrence {nth})" if nth != 1 else ""
        )
    return f"{at * 1000:g} ms after the moment {after}"


def _why_never(fault: Mapping[str, Any]) -> str:
    """Why a scheduled fault never started, as far as the history can tell: the run
    ended before its time, or, for one at a moment, the moment never came (or came too
    late to open before the run's end). Every line about a fault that never started
    says it so, from here."""
    if _anchor(fault) is None:
        return "the run ended before it"
    return "its moment never came, or too late to open before the run's end"


def slip_lines(windows: Sequence[Mapping[str, Any]], t_end_s: float) -> list[str]:
    """One line per fault window (series.json's faults) that lasted longer than its
    planned duration (`planned_s`, from its start's `extra`) by more than the tolerance
    (SLIP_FLOOR_S, SLIP_SHARE). The slip is the observed length less the planned one,
    not the stop against a planned end: a fault at a moment has no planned end before
    its moment. A window still open when the history ended counts to its
    end. Windows of no planned length (a restart) and older series without
    `planned_s` have nothing to slip against."""
    out = []
    for w in sorted(windows, key=lambda w: float(w.get("start") or 0)):
        planned, start = w.get("planned_s"), w.get("start")
        if not planned or start is None or (w.get("error") or "").startswith(NOT_INJECTED):
            continue
        open_ = w.get("stop") is None
        stop = t_end_s if open_ else float(w["stop"])
        lasted = stop - float(start)
        slip = lasted - float(planned)
        if slip <= max(SLIP_FLOOR_S, SLIP_SHARE * float(planned)):
            continue
        end = "and was still open when the history ended" if open_ else f"to {stop:.1f} s"
        out.append(
            f"fault {w.get('kind')} {w.get('target')} slipped: planned for {float(planned):g} s, "
            f"it lasted {lasted:.1f} s ({slip:.1f} s more), from {float(start):.1f} s {end}"
        )
    return out
