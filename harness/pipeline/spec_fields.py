"""Reading a pipeline file's fields: the one-line error naming the field and the fix,
typed field readers, and the check of `{...}` templates against what the file declares."""

from __future__ import annotations

import re
import string
from typing import Any

from harness.pipeline.spec_model import RUN_FIELDS, SERVICE_FIELDS, SOURCE_FIELDS, PipelineError

NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


def spec_error(where: str, problem: str, fix: str) -> PipelineError:
    """The one-line error for field `where`: its problem and the fix."""
    return PipelineError(f"{where}: {problem}; {fix}")


def table_field(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """The table `data[key]` (empty when missing); anything else is named."""
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise spec_error(f"{where}{key}", f"is {type(value).__name__}", f"write a [{key}] table")
    return value


def only_fields(data: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    """Refuse a key of `data` that is not in `known` (a typo would be ignored otherwise)."""
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise spec_error(
            f"{where}{unknown[0]}", "is not a known field", f"use one of: {', '.join(known)}"
        )


def str_field(data: dict[str, Any], key: str, where: str, default: str | None = None) -> str | None:
    """The string `data[key]` (`default` when missing); anything else is named."""
    value = data.get(key, default)
    if value is not None and not isinstance(value, str):
        raise spec_error(f"{where}{key}", f"is {value!r}", "write a string in quotes")
    return value


def number_field(data: dict[str, Any], key: str, where: str, default: float) -> float:
    """The number >= 0 `data[key]` (`default` when missing); anything else is named."""
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise spec_error(f"{where}{key}", f"is {value!r}", "write a number >= 0")
    return float(value)


def template_names(text: str, where: str) -> list[str]:
    """The placeholders of `text` (`{postgres.dsn}` -> "postgres.dsn")."""
    try:
        return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        raise spec_error(
            where, f"{text!r} is not a valid template ({exc})", "write {{ for a brace"
        ) from None


def check_template(
    text: str, where: str, services: tuple[str, ...], extra: tuple[str, ...]
) -> None:
    """Raise PipelineError if `text` names a placeholder the run cannot fill."""
    allowed = set(RUN_FIELDS) | set(extra) | {f"source.{f}" for f in SOURCE_FIELDS}
    for svc in services:
        allowed |= {f"{svc}.{f}" for f in SERVICE_FIELDS[svc]}
    for name in template_names(text, where):
        if name not in allowed:
            svc = name.split(".")[0]
            if svc in SERVICE_FIELDS and svc not in services:
                fix = f'add "{svc}" to services'
            else:
                fix = f"use one of: {', '.join(sorted(allowed))}"
            raise spec_error(where, f"{{{name}}} is not known", fix)
