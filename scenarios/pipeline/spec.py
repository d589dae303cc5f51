"""The pipeline file: a user's pipeline described in TOML, with no Python.

TOML, read by the standard library's `tomllib`: no dependency to install, comments
for the starting files `driftlab init` writes, and typed values (numbers, lists,
tables) without YAML's surprises (`no` read as false, `1.10` as a float).

    name = "pg-to-redis"                # the run folder's name
    services = ["postgres", "redis"]    # from driftlab's stack
    [external]                          # or services already running, by URL
    [source]                            # the system of record the workload writes:
                                        # a key-value table, or tables, a seed and
                                        # [[source.transactions]]
                                        # (driftlab.scenarios.pipeline.spec_model)
    [processes.<name>]                  # the user's programs: command, env, ready
    [stores.<name>]                     # derived stores, and how driftlab reads them
    [workload]                          # keys, clients, rate, duration, mix
    [[connectors]]                      # Kafka Connect connectors, as their JSON configs
    [[faults]]                          # the fault schedule (docs/scenarios.md)
    [expect]                            # anomaly kinds present / absent
    [converge]                          # how long to wait for the stores to settle

`load` returns a `Pipeline` or raises `PipelineError`, one line naming the field and
the fix. Templates (`{postgres.dsn}`, `{namespace}`, ...) are checked here against the
declared services; they are filled in at run time (driftlab.scenarios.pipeline.links).

Each section's reader is a module of its own (driftlab.scenarios.pipeline.spec_*); the
sections are pydantic models, and the objects a run uses are mostly those models
themselves, importable from here (spec_fields says how pydantic's errors become that
one line): pydantic rather than msgspec because the checks need the file's context
(its services and processes, for templates) and cross-field rules, which pydantic's
validators take and msgspec's type-only decoding does not; and its errors carry the
place and the bound broken.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from driftlab.harness.lab.nemesis.schedule import Schedule
from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.workload.spec import WorkloadSpec
from driftlab.scenarios.pipeline.spec_connectors import ConnectorSpec, parse_connectors
from driftlab.scenarios.pipeline.spec_expect import parse_expectations, parse_faults, parse_workload
from driftlab.scenarios.pipeline.spec_external import parse_external, parse_services, with_external
from driftlab.scenarios.pipeline.spec_fields import (
    NAME_PATTERN,
    Fix,
    Name,
    Number,
    PipelineError,
    Section,
    Text,
    spec_error,
    validated,
)
from driftlab.scenarios.pipeline.spec_model import KAFKA_CREDENTIALS, Converge, Expect, SqlSource
from driftlab.scenarios.pipeline.spec_sections import ProcessSpec, StoreSpec


@dataclass(frozen=True)
class Pipeline:
    """A loaded pipeline file."""

    name: str
    path: Path
    services: tuple[str, ...]  # started on driftlab's stack
    source: SqlSource
    processes: tuple[ProcessSpec, ...]
    stores: tuple[StoreSpec, ...]
    workload: WorkloadSpec
    faults: Schedule
    expectations: dict[str, str]
    converge: Converge
    summary: str = ""
    external: dict[str, Endpoint] = field(default_factory=dict)  # already running
    connectors: tuple[ConnectorSpec, ...] = ()

    @property
    def reached(self) -> tuple[str, ...]:
        """Every service the pipeline uses: driftlab's and the external ones."""
        return (*self.services, *self.external)

    @property
    def folder(self) -> Path:
        """The pipeline file's folder: relative paths are relative to it."""
        return self.path.parent


class FileSection(Section):
    """The pipeline file's top level; each section is read by its own module."""

    name: Name | None = None
    summary: Text = ""
    services: Annotated[tuple[Text, ...], Fix('write services = ["postgres", ...]')] = ()
    external: dict[str, Any] = Field(default_factory=dict)
    recovery: Number = 2.0
    source: dict[str, Any] = Field(default_factory=dict)
    processes: dict[str, Any] = Field(default_factory=dict)
    stores: dict[str, Any] = Field(default_factory=dict)
    workload: dict[str, Any] = Field(default_factory=dict)
    faults: Annotated[tuple[Any, ...], Fix("write [[faults]] tables")] = ()
    expect: Expect = Expect()
    converge: Converge = Converge()
    connectors: Annotated[tuple[Any, ...], Fix("write [[connectors]] tables")] = ()


def parse(data: dict[str, Any], path: Path) -> Pipeline:
    """A Pipeline from the TOML's table (`path` names the file, for relative paths)."""
    top = validated(FileSection, data, "")
    name = top.name or path.stem
    if not NAME_PATTERN.match(name):
        raise spec_error(
            "name", f"{name!r} is not usable as a folder name", "use letters, digits, - and _"
        )
    external = parse_external(top.external)
    own = parse_services(top.services, external)
    services = (*own, *external)  # what templates, stores and link faults may name
    kafka = external.get("kafka")
    credentials = tuple(f"kafka.{k}" for k in KAFKA_CREDENTIALS if kafka and k in kafka.extra)
    # {<process>.port}, {<process>.url}, and an external Kafka's {kafka.user}, ...
    ports = (*(f"{n}.{f}" for n in top.processes for f in ("port", "url")), *credentials)
    known = {"services": services, "ports": ports}  # what templates and readers may name
    processes = tuple(
        validated(ProcessSpec, d, f"processes.{n}", name=n, **known)
        for n, d in top.processes.items()
    )
    source = validated(SqlSource, top.source, "source", folder=path.parent, **known)
    if not top.stores:
        raise spec_error("stores", "is empty", "declare at least one [stores.<name>] to read")
    stores = tuple(
        validated(StoreSpec, d, f"stores.{n}", name=n, transactional=source.transactional, **known)
        for n, d in top.stores.items()
    )
    workload = parse_workload(top.workload)
    store_names = {s.name for s in stores}
    bad_reads = set(workload.read_stores or ()) - store_names - {"source"}
    if bad_reads:
        raise spec_error(
            "workload.read_stores",
            f"names {sorted(bad_reads)}",
            f"use source or: {', '.join(sorted(store_names))}",
        )
    if source.transactional and set(workload.mix) != {"write"}:
        raise spec_error(
            "workload.mix",
            f"is {workload.mix!r}, and the source runs transactions",
            "remove it: the transactions' weights are the mix (a delete is a transaction)",
        )
    return Pipeline(
        name=name,
        path=path,
        services=own,
        external=external,
        source=source,
        processes=processes,
        stores=stores,
        workload=workload,
        faults=parse_faults(
            top.faults,
            top.recovery,
            tuple(p.name for p in processes),
            services,
            own,
            tuple(s.name for s in stores if s.kind != "log"),
        ),
        expectations=parse_expectations(top.expect, stores),
        converge=top.converge,
        summary=top.summary,
        connectors=parse_connectors(top.connectors, path.parent, own, services, ports),
    )


def load(path: Path, external: Mapping[str, str] | None = None) -> Pipeline:
    """Read and check the pipeline file at `path`, with `external` services by URL
    instead of the file's (`with_external`); PipelineError says what to fix."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PipelineError(
            f"{path}: cannot be read ({exc.strerror}); give a pipeline file's path"
        ) from None
    try:
        data = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PipelineError(f"{path}: not valid TOML ({exc}); fix the syntax there") from None
    return parse(with_external(data, external or {}), path.resolve())
