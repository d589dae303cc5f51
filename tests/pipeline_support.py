"""Pipeline files the tests run: the shared ones in tests/pipelines/, and pieces to write
others (a process that repeats one shell line, the workload and convergence sections)."""

from __future__ import annotations

from pathlib import Path

from harness.app.pipeline import PipelineResult, run_pipeline
from harness.pipeline.spec import load
from harness.services.stack import Stack


def looping(line: str, pause: float) -> str:
    """A process's `command` and `ready`, as TOML: a shell that says `started`, then
    runs `line` over and over, `pause` seconds apart."""
    return f"""command = ["bash", "-c", '''
echo started
while true; do
  {line}
  sleep {pause}
done''']
ready = {{ log = "started" }}
"""


def settings(
    *, clients: int, keys: int, rate: int, duration: int, timeout: int, window: int
) -> str:
    """The [workload] and [converge] sections, as TOML."""
    return f"""
[workload]
clients = {clients}
keys = {keys}
rate = {rate}
duration = {duration}

[converge]
timeout = {timeout}
window = {window}
"""


PIPELINES = Path(__file__).resolve().parent / "pipelines"


def pipeline_text(name: str) -> str:
    """The text of tests/pipelines/<name>.toml."""
    return (PIPELINES / f"{name}.toml").read_text()


def run_text(
    tmp_path: Path, stack: Stack, text: str, name: str, seed: int, analyze: bool = True
) -> PipelineResult:
    """Run the pipeline file `text`, written as `name` in `tmp_path`, on `stack`."""
    path = tmp_path / name
    path.write_text(text)
    return run_pipeline(
        load(path), seed=seed, runs_dir=tmp_path / "runs", stack=stack, analyze=analyze
    )
