"""The pipeline files the pipeline tests share, in tests/pipelines/."""

from __future__ import annotations

from pathlib import Path

PIPELINES = Path(__file__).resolve().parent / "pipelines"


def pipeline_text(name: str) -> str:
    """The text of tests/pipelines/<name>.toml."""
    return (PIPELINES / f"{name}.toml").read_text()
