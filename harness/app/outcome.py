"""A run's outcome in words: what failed, one example each, the report, the reproduction.

Shared by the pytest plugin (a failing test's message) and `driftlab matrix` (a JUnit
failure's message), so both tell a failure the same way. Built only from the run
folder's analysis outputs (analysis.json, examples.json) and the runner's result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from driftlab.checkers.analysis_files import (
    Analysis,
    KindExamples,
    Output,
    OutputFileError,
    read_analysis,
    read_examples,
)
from driftlab.harness.history import exitcodes
from driftlab.harness.lab.runner.runner import RunResult
from driftlab.harness.lab.scenario import Scenario
from driftlab.scenarios.catalogue.registry import all_scenarios


@dataclass(frozen=True)
class Outcome:
    """One judged run: the kinds behind its verdict and one example line per kind."""

    result: RunResult
    scenario: Scenario
    forbidden: dict[str, int] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    found: dict[str, int] = field(default_factory=dict)
    examples: dict[str, str] = field(default_factory=dict)
    caveats: list[str] = field(default_factory=list)  # analysis.json's: untested, slipped
    duration: float | None = None
    rerun: str | None = None  # the command for a scenario the registry does not know
    analysis: Analysis | None = None  # analysis.json, when it could be read

    @property
    def passed(self) -> bool:
        """Reproduced, held (or no expectations): the run behaved as the scenario
        predicts."""
        return self.result.exit_code == exitcodes.OK

    @property
    def run_dir(self) -> Path:
        """The run folder as a plain Path (`result.run_dir` is its RunDir, which names
        every file in it)."""
        return self.result.run_dir.path

    @property
    def report(self) -> Path | None:
        """RUN_DIR/report.html, when the runner wrote it."""
        path = self.result.run_dir.report
        return path if path.exists() else None

    def reproduce(self) -> str:
        """The command that repeats this run (same scenario, seed and duration)."""
        registry = all_scenarios()
        if registry.get(self.scenario.name) is not None:
            # A claim id names the claim's first scenario; a variant goes by its name.
            claim = self.scenario.claim
            use_claim = claim and _first_of_claim(registry, claim) == self.scenario.name
            cmd = f"driftlab run {claim if use_claim else self.scenario.name}"
            cmd += f" --seed {self.result.seed}"
            if self.duration is not None:
                cmd += f" --duration {self.duration:g}s"
            return cmd
        if self.rerun:
            return self.rerun
        extra = f", duration={self.duration:g}" if self.duration is not None else ""
        return (
            f"the same Scenario object ({self.scenario.name}, not registered) "
            f"with seed={self.result.seed}{extra}"
        )

    def headline(self) -> str:
        """`scenario (claim): verdict` in one line."""
        claim = f" (claim {self.scenario.claim})" if self.scenario.claim else ""
        what = self.result.verdict or ("error" if self.result.error else "not judged")
        if self.result.exit_code == exitcodes.INTERRUPTED:
            what = "interrupted"
        return f"driftlab scenario {self.scenario.name}{claim}, seed {self.result.seed}: {what}"

    def summary(self) -> str:
        """Several lines a person reads: the verdict, each failing kind with one example,
        the report path and the command that reproduces the run."""
        lines = [self.headline()]
        if self.result.error:
            lines.append(f"  run failed: {self.result.error}")
            lines.append(f"  log: {self.result.run_dir.runner_log}")
        for kind, n in sorted(self.forbidden.items()):
            lines.append(f"  forbidden anomaly {kind}: {n}{self._example(kind)}")
        for kind in self.missing:
            lines.append(f"  predicted anomaly {kind} not found")
        if self.found:
            seen = ", ".join(f"{k} {n}" for k, n in sorted(self.found.items()))
            lines.append(f"  also observed: {seen}")
        lines += [f"  note: {line}" for line in self.caveats]
        lines.append(f"  report: {self.report or '(none)'}")
        lines.append(f"  run folder: {self.run_dir}")
        lines.append(f"  reproduce with: {self.reproduce()}")
        return "\n".join(lines)

    def _example(self, kind: str) -> str:
        text = self.examples.get(kind)
        return f"; e.g. {text}" if text else ""


def _first_of_claim(registry: dict[str, Scenario], claim: str) -> str | None:
    for sc in registry.values():
        if (sc.claim or "").upper() == claim.upper():
            return sc.name
    return None


def outcome_of(result: RunResult, scenario: Scenario, duration: float | None = None) -> Outcome:
    """The outcome of a finished run, read from its analysis outputs (absent outputs
    give an outcome with the runner's error or verdict only; unreadable ones, that and
    a note that names the file and the fix)."""
    run_dir = result.run_dir
    notes: list[str] = []
    analysis = _read_or_note(read_analysis, run_dir.analysis, notes)
    examples = _read_or_note(read_examples, run_dir.examples, notes)
    counts = {k: int(v) for k, v in (analysis.counts if analysis else result.counts).items() if v}
    forbidden = {k: counts[k] for k in analysis.forbidden_found if k in counts} if analysis else {}
    found = {k: n for k, n in counts.items() if k not in forbidden}
    kinds = examples.kinds if examples else {}
    lines = {k: _example_line(kinds[k]) for k in counts if k in kinds}
    return Outcome(
        result,
        scenario,
        forbidden=forbidden,
        missing=list(analysis.expected_missing) if analysis else [],
        found=found,
        examples={k: v for k, v in lines.items() if v},
        caveats=(list(analysis.caveats) if analysis else []) + notes,
        duration=duration,
        analysis=analysis,
    )


def _read_or_note(read: Callable[[Path], Output], path: Path, notes: list[str]) -> Output | None:
    """The output file `read` reads at `path`; None when it is missing, or unreadable
    (its one line added to `notes`)."""
    try:
        return read(path)
    except FileNotFoundError:
        return None
    except OutputFileError as e:
        notes.append(str(e))
        return None


def _example_line(entry: KindExamples) -> str:
    if not entry.examples:
        return ""
    row = entry.examples[0]
    where = " ".join(
        f"{name} {value}"
        for name, value in (("store", row.store), ("key", row.key), ("consumer", row.consumer))
        if value is not None
    )
    at = f" at t={row.t:.2f}s" if row.t is not None else ""
    return f"{where}{at}: {row.detail or '(no detail)'}".strip()
