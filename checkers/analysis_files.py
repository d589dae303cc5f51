"""The typed model of analysis.json and examples.json (docs/analysis.md).

The analysis writes these files from these models and every reader reads them back
through `read_analysis` and `read_examples`, so a key is named once: a writer that
drops a field fails its tests, a reader that misspells one fails type checking, and a
corrupt or old file fails in one line that names it and the fix. Each model forbids
keys it does not know: the model is the whole format.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
)

from driftlab.harness.history.rundir import (
    NotAJsonObject,
    strict_json_object,
    write_json_atomically,
)

ANALYSIS_SCHEMA = 1
"""Every analysis output's `schema`; an incompatible change of a file bumps it."""


class OutputFileError(ValueError):
    """An analysis output that cannot be read as this driftlab writes it: the message
    names the file and the fix."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _File(_Model):
    """A whole output file, its `schema` first."""

    model_config = ConfigDict(populate_by_name=True)

    # `schema` would shadow BaseModel.schema: the field is `schema_`, `schema` in the file.
    schema_: int = Field(ANALYSIS_SCHEMA, alias="schema")


class RunBlock(_Model):
    """analysis.json's `run`: which run was analysed."""

    run_dir: str
    scenario: str | None
    seed: int | None


class HistoryBlock(_Model):
    """analysis.json's `history`: what the reader found in the history."""

    events: int
    segments: int
    complete: bool
    cut_short: bool
    dropped_partial_lines: int
    t0_ns: int
    t1_ns: int


class LagFigures(_Model):
    """One derived store's lag, in ms (driftlab.checkers.reference.staleness.lag)."""

    count: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float


class WorstPoll(_Model):
    """The worst poll's realtime lag of the run
    (driftlab.checkers.reference.reorder.RealtimeLag)."""

    channel: str
    partition: int | None
    consumer: str
    process: str | None
    time_ns: int
    lag_ns: int
    t: float
    lag_ms: float


class RealtimeLagBlock(_Model):
    """analysis.json's `realtime_lag`: channel partitions with a poll, and the worst."""

    partitions: int
    worst: WorstPoll | None


class CheckerStatus(_Model):
    """How one checker went: `error` holds its message's first line."""

    status: Literal["ok", "error"]
    error: str | None


class Timings(_Model):
    """The analysis's seconds: history to Parquet, the keyed pass, the other files, all."""

    convert_s: float
    checkers_s: float
    outputs_s: float
    total_s: float


class SparkInfo(_Model):
    """The Spark the analysis ran on."""

    master: str
    version: str


class Analysis(_File):
    """analysis.json: the verdict, the counts and the history's facts."""

    run: RunBlock
    history: HistoryBlock
    counts: dict[str, int]
    coverage: dict[str, int]
    counts_by_checker: dict[str, int]
    notes: dict[str, int]
    lost_where: dict[str, dict[str, int]]
    lag: dict[str, LagFigures]
    realtime_lag: RealtimeLagBlock | None
    """None (`{}` in the file) when the reorder checker failed."""
    expectations: dict[str, Literal["present", "absent"]]
    verdict: str
    forbidden_found: list[str]
    expected_missing: list[str]
    reasons: list[str]
    inconclusive: list[str]
    # Added to schema 1 after its first files: an analysis older than them has none.
    untested: list[str] = []
    caveats: list[str] = []
    lab_failures: list[dict[str, Any]]
    checkers: dict[str, CheckerStatus]
    timings: Timings
    spark: SparkInfo

    @field_validator("realtime_lag", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return None if value == {} else value

    @field_serializer("realtime_lag")
    def _none_is_empty(self, value: RealtimeLagBlock | None) -> Any:
        return {} if value is None else value.model_dump()

    @property
    def incomplete_checkers(self) -> list[str]:
        """Checkers that failed: their kinds count zero regardless."""
        return [name for name, c in self.checkers.items() if c.status != "ok"]


class Example(_Model):
    """One sampled anomaly with its evidence (a list of history events, as the checker
    gave them; `{"unparsed": text}` for evidence that was not JSON)."""

    store: str | None
    key: str | None
    consumer: str | None
    time_ns: int | None
    t: float | None
    detail: str | None
    evidence: list[Any]

    def events(self) -> list[dict[str, Any]]:
        """The evidence's events (the dicts among it)."""
        return [e for e in self.evidence if isinstance(e, dict)]


class KindExamples(_Model):
    """One kind in examples.json: its checker, its count and its sampled rows."""

    checker: str
    count: int
    examples: list[Example]


class Examples(_File):
    """examples.json: per kind, its count and a few sampled rows, in time order."""

    per_kind: int
    kinds: dict[str, KindExamples]


Output = TypeVar("Output", Analysis, Examples)


def write_output(path: Path, output: Analysis | Examples, *, indent: int | None = 2) -> Path:
    """Write `output` as its file at `path`, atomically (driftlab.harness.history.rundir)."""
    return write_json_atomically(path, output.model_dump(mode="json", by_alias=True), indent=indent)


def read_analysis(path: Path) -> Analysis:
    """analysis.json at `path`; FileNotFoundError when it is missing, OutputFileError
    (one line: the file and the fix) when it is corrupt or of another format."""
    return _read(path, Analysis)


def read_examples(path: Path) -> Examples:
    """examples.json at `path`, as read_analysis reads analysis.json."""
    return _read(path, Examples)


def _read(path: Path, model: type[Output]) -> Output:
    fix = f"re-run `driftlab analyze {path.parent}`"
    try:
        data = strict_json_object(path)
    except NotAJsonObject as e:
        raise OutputFileError(f"{e}; {fix}") from None
    if data.get("schema") != ANALYSIS_SCHEMA:
        raise OutputFileError(
            f"{path} has schema {data.get('schema')!r}, this driftlab reads schema "
            f"{ANALYSIS_SCHEMA}; {fix}"
        )
    return validated(
        model,
        data,
        lambda why: OutputFileError(
            f"{path} is not {path.name} as this driftlab writes it ({why}); {fix}"
        ),
    )


def validated(model: type[Output], data: Any, failure: Callable[[str], Exception]) -> Output:
    """`data` as `model`; else raises `failure` of what did not fit, in a few words: the
    first field and why, and how many more."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise failure(_mismatch(e)) from None


def _mismatch(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top)"
    more = f", and {error.error_count() - 1} more" if error.error_count() > 1 else ""
    return f"{where}: {first['msg'].lower()}{more}"
