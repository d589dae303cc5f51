"""Pieces of the pipeline files the tests run: a process that repeats one shell line,
the workload and convergence sections, and a store that never settles."""

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


RESTLESS = (
    """
name = "restless"
services = ["postgres", "redis"]

[processes.noise]
"""
    + looping('redis-cli -u "$URL" --no-auth-warning SET "$KEY" "$RANDOM" >/dev/null', 0.1)
    + """env = { URL = "{redis.url}", KEY = "{namespace}:k0" }

[stores.cache]
redis = { pattern = "{namespace}:*" }
"""
    + settings(clients=1, keys=1, rate=10, duration=2, timeout=3, window=1)
)
"""A store that keeps changing: one key set to a new random value every 0.1 s."""


def run_text(
    tmp_path: Path, stack: Stack, text: str, name: str, seed: int, analyze: bool = True
) -> PipelineResult:
    """Run the pipeline file `text`, written as `name` in `tmp_path`, on `stack`."""
    path = tmp_path / name
    path.write_text(text)
    return run_pipeline(
        load(path), seed=seed, runs_dir=tmp_path / "runs", stack=stack, analyze=analyze
    )
