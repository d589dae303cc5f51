"""Schedules: the steps that drive the simulator, and their JSON file format.

A schedule is a list of steps. Each step names one action of one actor (a client, a
consumer, the network). The simulator skips a step that is not enabled in its current
state, so any generated list is a valid schedule; the *executed* schedule keeps only
the steps that ran, with the values they wrote filled in, and ends with `quiesce`.
docs/explore.md documents the format for `driftlab replay`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from driftlab.harness.history.schema import SCHEMA_VERSION, Compact

SCHEDULE_FORMAT = "driftlab-schedule"
SCHEDULE_VERSION = 1


class Action(StrEnum):
    """What a step does. The docstring of `describe` says it in words."""

    DB_WRITE = "db-write"  # client writes key to the source database (one transaction)
    DB_DELETE = "db-delete"  # client deletes a present key from the source database
    CACHE_WRITE = "cache-write"  # client writes its last db value to the cache directly
    DEPOSIT = "deposit"  # client appends +1 to an aggregate of the event store
    VALIDATE = "validate"  # client reads an aggregate and validates a withdrawal of 1
    APPEND = "append"  # client appends the validated withdrawal (-1)
    POLL = "poll"  # consumer receives the next message (of a partition, for a log)
    APPLY = "apply"  # consumer applies its oldest received message to its store
    COMMIT = "commit"  # consumer commits its offsets (what its policy allows)
    CRASH = "crash"  # process killed: a consumer's unacked work or a client's next write
    RESTART = "restart"  # a new process of the consumer starts from its committed state
    COMPACT = "compact"  # the broker compacts a partition: the latest record per key
    PARTITION = "partition"  # the network link `target` is cut
    HEAL = "heal"  # every cut link is restored
    QUIESCE = "quiesce"  # heal, restart, drain every consumer, read final states


@dataclass(frozen=True, slots=True)
class Step(Compact):
    """One step of a schedule; unset fields do not apply to the action."""

    action: str
    actor: str | None = None
    key: str | None = None
    value: str | None = None
    partition: int | None = None
    offset: int | None = None
    target: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        """A step from its JSON object; unknown actions or fields raise ScheduleError."""
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ScheduleError(f"step {data}: unknown fields {sorted(unknown)}")
        if data.get("action") not in set(Action):
            raise ScheduleError(
                f"step {data}: action must be one of {', '.join(a.value for a in Action)}"
            )
        return cls(**data)


_SAYS: dict[str, str] = {
    Action.DB_WRITE: "client {who} writes {kv} to the db",
    Action.DB_DELETE: "client {who} deletes {key} from the db",
    Action.CACHE_WRITE: "client {who} writes {kv} to the cache",
    Action.DEPOSIT: "client {who} deposits 1 into {key}",
    Action.VALIDATE: "client {who} reads {key} and validates a withdrawal of 1",
    Action.APPEND: "client {who} appends the withdrawal from {key}",
    Action.POLL: "consumer {who} receives the next message{from_partition}{at}{colon_kv}",
    Action.APPLY: "consumer {who} applies its oldest received message{space_kv}{at}",
    Action.COMMIT: "consumer {who} commits its offsets",
    Action.CRASH: "consumer {who} crashes",
    Action.RESTART: "consumer {who} restarts",
    Action.COMPACT: "the broker compacts partition {partition}",
    Action.PARTITION: "network link {target} is cut",
    Action.HEAL: "every cut link heals",
    Action.QUIESCE: "quiesce: heal, restart consumers, drain them, read final states",
}
"""Each action in words; a crash with a key is a client's (`_CLIENT_CRASH`)."""

_CLIENT_CRASH = "client {who} crashes before writing {kv} to the cache"


def describe(step: Step) -> str:
    """The step in words, as `driftlab explore` prints it."""
    a, who = step.action, step.actor
    says = _CLIENT_CRASH if a == Action.CRASH and step.key is not None else _SAYS.get(a)
    if says is None:
        return f"{a} {who or ''}".strip()
    kv = f"{step.key}={step.value}" if step.value is not None else f"{step.key} (deleted)"
    keyed = step.key is not None
    return says.format(
        who=who,
        kv=kv,
        key=step.key,
        partition=step.partition,
        target=step.target,
        at=f" (offset {step.offset})" if step.offset is not None else "",
        from_partition=f" from partition {step.partition}" if step.partition is not None else "",
        colon_kv=f": {kv}" if keyed else "",
        space_kv=f" {kv}" if keyed else "",
    )


@dataclass(slots=True)
class Schedule:
    """A schedule file: the setup it drives, its steps and what was seen in it."""

    setup: str
    steps: list[Step]
    seed: int | None = None
    property: str | None = None
    examples: int | None = None
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """The schedule as the JSON document of docs/explore.md."""
        doc = {
            "format": SCHEDULE_FORMAT,
            "version": SCHEDULE_VERSION,
            "history_schema": SCHEMA_VERSION,
            "setup": self.setup,
            "seed": self.seed,
            "property": self.property,
            "examples": self.examples,
            "params": self.params,
            "steps": [s.to_dict() for s in self.steps],
            "anomalies": self.anomalies,
        }
        return json.dumps(doc, indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Schedule:
        """Parse a schedule document; a malformed one raises ScheduleError."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScheduleError(f"not JSON: {exc}") from None
        if not isinstance(doc, dict) or doc.get("format") != SCHEDULE_FORMAT:
            raise ScheduleError(f'not a schedule: expected "format": "{SCHEDULE_FORMAT}"')
        if doc.get("version") != SCHEDULE_VERSION:
            raise ScheduleError(
                f"schedule version {doc.get('version')} is not {SCHEDULE_VERSION}: "
                "regenerate it with this driftlab's `driftlab explore`"
            )
        steps = doc.get("steps")
        if not isinstance(doc.get("setup"), str) or not isinstance(steps, list):
            raise ScheduleError('a schedule needs "setup" (string) and "steps" (list)')
        return cls(
            setup=doc["setup"],
            steps=[Step.from_dict(s) for s in steps],
            seed=doc.get("seed"),
            property=doc.get("property"),
            examples=doc.get("examples"),
            anomalies=list(doc.get("anomalies") or []),
            params=dict(doc.get("params") or {}),
        )

    def save(self, path: Path) -> None:
        """Write the schedule file."""
        path.write_text(self.to_json())

    @classmethod
    def load(cls, path: Path) -> Schedule:
        """Read a schedule file; a missing or malformed file raises ScheduleError."""
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ScheduleError(f"cannot read {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ScheduleError(
                "not a schedule: the file is not UTF-8 text (a binary file?); pass a "
                "schedule.json that `driftlab explore` saved"
            ) from None
        return cls.from_json(text)


class ScheduleError(ValueError):
    """A schedule document is malformed; the message says what and how to fix it."""
