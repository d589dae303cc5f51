"""The [[connectors]] of a pipeline file: Kafka Connect connectors, as their JSON configs."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, RootModel, ValidationInfo

from driftlab.scenarios.pipeline.spec_fields import (
    PORTS,
    Section,
    Text,
    placeholders_known,
    refuse,
    spec_error,
    validated,
)

CONNECT_REFERENCE = re.compile(r"\$\{([^{}]*)\}")
"""Connect's own `${provider:path:key}` and the JDBC sink's `${topic}`: kept as written."""


@dataclass(frozen=True)
class ConnectorSpec:
    """A Kafka Connect connector of the pipeline: its config as Connect takes it, each
    value a template. `name` is the pipeline's; on the worker it is registered as
    `<namespace>_<name>`, so runs never share a connector's offsets."""

    name: str
    config: dict[str, str]


def connect_template(text: str) -> str:
    """A connector config value as a driftlab template: Connect's `${...}` escaped, so
    only driftlab's `{postgres.host}`-style placeholders are filled."""
    return CONNECT_REFERENCE.sub(lambda m: "${{" + m.group(1) + "}}", text)


def _config_value(value: Any, info: ValidationInfo) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    if not isinstance(value, int | float | str):
        raise refuse(f"is {value!r}", "write a string, a number or true/false")
    text = str(value)
    placeholders_known(connect_template(text), info, (PORTS,))  # Connect's ${...} kept
    return text


class ConnectorConfig(RootModel[dict[str, Annotated[Any, AfterValidator(_config_value)]]]):
    """A connector's settings as Connect takes them, each value a template."""


class ConnectorSection(Section):
    """One `[[connectors]]`: a name, and the config inline or in a JSON file."""

    name: Text | None = None
    config: dict[str, Any] | None = None
    file: Text | None = None


def _connector(
    i: int, data: Any, folder: Path, services: tuple[str, ...], ports: tuple[str, ...]
) -> ConnectorSpec:
    where = f"connectors[{i}]"
    c = validated(ConnectorSection, data, where)
    if (c.config is None) == (c.file is None):
        raise spec_error(
            where,
            "needs one of config and file",
            'give config = { "connector.class" = ... } or file = "connector.json"',
        )
    name, raw = c.name, c.config
    if c.file is not None:
        try:
            raw = json.loads((folder / c.file).read_text())
        except OSError as exc:
            raise spec_error(
                f"{where}.file", f"{c.file!r} cannot be read ({exc.strerror})", "give a JSON file"
            ) from None
        except ValueError as exc:
            raise spec_error(
                f"{where}.file", f"{c.file!r} is not JSON ({exc})", "fix it there"
            ) from None
        # Connect's POST /connectors body, {"name": ..., "config": {...}}, or the config.
        if isinstance(raw, dict) and isinstance(raw.get("config"), dict):
            name = name or raw.get("name")
            raw = raw["config"]
    if not isinstance(raw, dict) or not raw:
        raise spec_error(
            f"{where}.config", "is not a table of settings", "give the connector's config"
        )
    name = name or raw.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise spec_error(
            f"{where}.name", f"is {name!r}", "name the connector: letters, digits, _, . and -"
        )
    raw = {k: v for k, v in raw.items() if k != "name"}  # the worker's: <namespace>_<name>
    config = validated(ConnectorConfig, raw, f"{where}.config", services=services, ports=ports).root
    if "connector.class" not in config:
        raise spec_error(
            f"{where}.config",
            "lacks connector.class",
            'give "connector.class" = "io.debezium.connector.postgresql.PostgresConnector" ...',
        )
    return ConnectorSpec(name, config)


def parse_connectors(
    raw: tuple[Any, ...],
    folder: Path,
    own: tuple[str, ...],
    services: tuple[str, ...],
    ports: tuple[str, ...],
) -> tuple[ConnectorSpec, ...]:
    """`[[connectors]]`: run on driftlab's Connect worker or the user's (`external.connect`),
    which reaches every other service through links of its own (`connect->postgres`)."""
    if raw and "connect" not in services:
        raise spec_error(
            "connectors",
            "need a Connect worker",
            'add "connect" to services (or give your own: external.connect = "http://host:port")',
        )
    if raw and "connect" in own and "kafka" in services and "kafka" not in own:
        raise spec_error(
            "connectors",
            "run on driftlab's Connect worker, which works on driftlab's Kafka, not external.kafka",
            "give your own worker too (external.connect) or use driftlab's kafka",
        )
    reached = tuple(s for s in services if s != "connect")
    out = tuple(_connector(i, c, folder, reached, ports) for i, c in enumerate(raw))
    names = [c.name for c in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise spec_error(
            "connectors", f"name {twice[0]!r} twice", "give each connector its own name"
        )
    return out
