"""Jinja2 environment and file writing shared by the run report and the suite page.

Styles and scripts live in reports/static and are inlined at render time: a report is
one file that works offline, from a mail attachment or a CI artifact.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemBytecodeCache, PackageLoader, select_autoescape
from markupsafe import Markup


class ReportError(Exception):
    """A report cannot be built from these files; the message names the fix."""


def _static(name: str) -> Markup:
    """A file of reports/static, for inlining (our own files: trusted markup)."""
    return Markup(files("driftlab.reports").joinpath("static", name).read_text(encoding="utf-8"))


def grouped(n: int) -> str:
    """A count with thousands separators, as the CLI prints it (4,753, not 4753)."""
    return f"{n:,}"


def environment() -> Environment:
    """The template environment: autoescaped; a missing optional field renders empty."""
    env = Environment(
        loader=PackageLoader("driftlab.reports", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        # Each run's process compiled the same templates again; Jinja keys its cache
        # (a private folder in the temporary one) by the template's source.
        bytecode_cache=FileSystemBytecodeCache(),
    )
    env.globals["static"] = _static
    env.filters["grouped"] = grouped
    return env


def write_html(path: Path, template: str, context: dict[str, Any]) -> Path:
    """Render `template` with `context` into `path`, atomically (a browser open on the
    old file never sees half a page)."""
    html = environment().get_template(template).render(**context)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, path)
    return path
