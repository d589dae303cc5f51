"""A pipeline's stores that did not converge after the heal: such a run fails with that
reason (exit 1), whatever the anomaly counts say, and logs/run.json names the stores,
the keys and since when; so does a process of the pipeline's that did not come back
after a fault (`not_back`). A store that could not be read at the final reading makes the
run `inconclusive` (exit 3), naming it: the run proves nothing about that store, and
its reader's failure is no anomaly of the pipeline. Every run of a scenario is judged
so (harness.app.run); a setup that observes no store has nothing to say."""

from __future__ import annotations

import json

from checkers.verdict import INCONCLUSIVE
from harness import exitcodes
from harness.pipeline.observer import Divergence
from harness.rundir import RunDir, write_json_atomically
from harness.runner.runner import RunResult
from harness.setups.base import Setup


def judge_convergence(result: RunResult, setup: Setup) -> list[Divergence]:
    """The stores `setup` observed that did not converge; a run with any fails (exit 1)
    with the reason, and logs/run.json says which."""
    divergences: list[Divergence] = list(getattr(setup, "divergences", []))
    if divergences and not result.interrupted:
        reason = "not converged: " + "; ".join(d.line() for d in divergences)
        result.error = reason if result.error is None else f"{result.error}; {reason}"
        if result.exit_code == exitcodes.OK:
            result.exit_code = exitcodes.VERDICT
        _note(result.run_dir, divergences, result.error)
    return divergences


def judge_not_back(result: RunResult, setup: Setup) -> list[str]:
    """The processes of `setup` that did not come back after a fault: the pipeline's
    finding, as a store that did not converge is; the run fails with it (exit 1)."""
    lines: list[str] = list(getattr(setup, "not_back", []))
    if lines and not result.interrupted:
        reason = "; ".join(lines)
        result.error = reason if result.error is None else f"{reason}; {result.error}"
        if result.exit_code == exitcodes.OK:
            result.exit_code = exitcodes.VERDICT
        summary = result.run_dir.summary
        try:
            data = json.loads(summary.read_text())
        except (OSError, ValueError):
            return lines
        data |= {"not_back": lines, "error": result.error, "exit_code": result.exit_code}
        write_json_atomically(summary, data)
    return lines


def judge_unreadable(result: RunResult, setup: Setup) -> list[str]:
    """Why the run is inconclusive: the stores `setup` could not read at the final
    reading (none: the verdict stands)."""
    unreadable: dict[str, str] = dict(getattr(setup, "unreadable", {}))
    if not unreadable or result.interrupted or result.exit_code == exitcodes.BAD_INPUT:
        return []
    reasons = [
        f"store {name} could not be read at the final reading ({why}); fix how it is read"
        for name, why in sorted(unreadable.items())
    ]
    result.verdict = INCONCLUSIVE
    result.inconclusive = result.reasons = reasons
    result.exit_code = exitcodes.LAB_FAILED
    result.error = f"{INCONCLUSIVE}: " + "; ".join(reasons)
    summary = result.run_dir.summary
    try:
        data = json.loads(summary.read_text())
    except (OSError, ValueError):
        return reasons
    data |= {"verdict": INCONCLUSIVE, "inconclusive": reasons, "error": result.error}
    data["exit_code"] = result.exit_code
    write_json_atomically(summary, data)
    return reasons


def _note(run_dir: RunDir, divergences: list[Divergence], error: str) -> None:
    """logs/run.json gains `not_converged` (the stores, keys and since when) and the
    run's error and exit code say so."""
    summary = run_dir.summary
    try:
        data = json.loads(summary.read_text())
    except (OSError, ValueError):
        return
    data["not_converged"] = [
        {
            "store": d.store,
            "keys": d.keys[:100],
            "count": len(d.keys),
            "settled": d.settled,
            "since_s": d.since_s,
            "never_held": d.never_held,
        }
        for d in divergences
    ]
    data["error"] = error
    if data.get("exit_code") == exitcodes.OK:
        data["exit_code"] = exitcodes.VERDICT
    write_json_atomically(summary, data)
