"""A mistake in a pipeline file is found before the workload, never blamed on the lab
nor on the pipeline.

Each check raises PipelineError (bad input, exit 2) with one line naming the field and
the fix: a process's command that is not on this machine and a duration too short
(before any service starts), an external service's address or password
that does not work, a `[source] write` statement that fails, a store's reader that
cannot read (once the processes are ready, before the workload). A process of the
user's that fails its first start is the pipeline not starting (PipelineDidNotStart,
exit 1).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import Any

import psycopg
import redis

from driftlab.harness.history.exitcodes import PipelineFailure
from driftlab.harness.lab.services.base import Endpoint
from driftlab.harness.lab.services.command import CommandProcess
from driftlab.harness.lab.services.process import HARNESS_NOTE
from driftlab.harness.lab.setups.connect import redis_client
from driftlab.scenarios.pipeline.spec import Pipeline, PipelineError

MIN_WORKLOAD_S = 1.0
"""The shortest workload a run takes: less gives the checkers nothing to judge."""


def one_line(exc: BaseException) -> str:
    """The first line of an error's message (a PostgreSQL error's primary message)."""
    diag = getattr(exc, "diag", None)
    text = (getattr(diag, "message_primary", None) or str(exc)).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def check_commands(pipeline: Pipeline) -> None:
    """Every process given as a command names a program this machine has: an
    executable file (relative to the process's folder) or a name on PATH. A command
    whose program is a template (`{python}`) is the lab's and is not checked."""
    for spec in pipeline.processes:
        if spec.image is not None or not spec.command or "{" in spec.command[0]:
            continue
        program = spec.command[0]
        where = f"processes.{spec.name}.command"
        if "/" in program:
            path = (pipeline.folder / spec.cwd / program).resolve()
            if not path.is_file():
                raise PipelineError(
                    f"{where}: {program} is not a file ({path}); build it first or fix the path"
                )
            if not os.access(path, os.X_OK):
                raise PipelineError(
                    f"{where}: {program} is not executable; chmod +x {path}, or run it "
                    f'through its interpreter: ["bash", "{program}"]'
                )
        elif shutil.which(program) is None:
            raise PipelineError(
                f"{where}: {program} is not on PATH; install it, or give its path "
                f'(["./{program}"] for one beside the file)'
            )


def check_duration(duration: float) -> None:
    """A workload of `duration` seconds gives the checkers something to judge (that it
    holds the file's faults, driftlab.harness.lab.scenario.Scenario.with_overrides checks)."""
    if duration < MIN_WORKLOAD_S:
        raise PipelineError(
            f"--duration: {duration:g} s is too short for a run; give at least "
            f"{MIN_WORKLOAD_S:g} s (e.g. --duration 10s)"
        )


def check_external(pipeline: Pipeline, postgres: str, redis_ep: Endpoint | None) -> None:
    """The external PostgreSQL (its conninfo `postgres`) and Redis answer with the
    login the file gives."""
    if "postgres" in pipeline.external:
        try:
            psycopg.connect(postgres, connect_timeout=5).close()
        except psycopg.Error as exc:
            raise PipelineError(
                f"external.postgres: cannot log in: {one_line(exc)}; fix its URL (address, "
                "user, password, database)"
            ) from None
    if "redis" in pipeline.external and redis_ep is not None:
        try:
            with redis_client(redis_ep, timeout=5.0) as r:
                r.ping()
        except redis.AuthenticationError as exc:
            raise PipelineError(
                f"external.redis: the password is refused ({one_line(exc)}); fix the "
                "password in its URL (redis://default:PASSWORD@host:port/0)"
            ) from None
        except redis.RedisError as exc:
            raise PipelineError(
                f"external.redis: does not answer at {redis_ep.address}: {one_line(exc)}; "
                "fix its URL, or start it"
            ) from None


def check_statement(field: str, conninfo: str, text: bytes, params: Any) -> None:
    """Run the user's `[source]` statement once in a transaction that is rolled back;
    PipelineError naming `field` when PostgreSQL refuses it."""
    try:
        conn = psycopg.connect(conninfo, connect_timeout=5)
    except psycopg.OperationalError:
        return  # the link or the server: the run finds and names that itself
    try:
        conn.execute(text, params)
    except psycopg.OperationalError:
        return
    except psycopg.Error as exc:
        raise PipelineError(
            f"{field}: fails on PostgreSQL: {one_line(exc)}; fix the statement (it runs "
            "with {key} and {value} as parameters and returns the new version)"
        ) from None
    finally:
        conn.rollback()
        conn.close()


def check_readers(readers: Mapping[str, Any], logs: Mapping[str, Any]) -> None:
    """Each store's reader reads once; PipelineError naming the store and the reader's
    error when it cannot (a table nowhere, a column, a refused password, an answer
    that is not JSON)."""
    for name, reader in [*readers.items(), *logs.items()]:
        try:
            if name in logs:
                reader.rows()
            else:
                reader.read_all()
        except Exception as exc:
            raise PipelineError(
                f"stores.{name}: its reader fails before the workload: {one_line(exc)}; "
                "fix how the store is read"
            ) from None


class PipelineDidNotStart(PipelineFailure):
    """A process of the user's failed its first start: the pipeline did not start."""


def process_failure(proc: CommandProcess, error: Exception) -> str:
    """Why the current start of `proc` failed, in the process's own words: how it
    ended and the last lines it printed."""
    try:
        printed = [
            line
            for line in proc.log_path.read_text(errors="replace").splitlines()
            if line.strip() and not line.startswith(HARNESS_NOTE)
        ]
    except OSError:
        printed = []
    code = proc.process.returncode() if proc.process is not None else None
    if code is not None:
        why = f"exited with status {code} before it was ready"
    elif proc.is_running():
        why = f"was not ready within {proc.ready_timeout:g} s ({proc.ready.describe()})"
    else:
        why = f"did not start ({one_line(error)})"
    said = " | ".join(printed[-3:]) or "(it printed nothing)"
    return f"{why}: {said} (its output: {proc.log_path})"


def did_not_start(proc: CommandProcess, error: Exception) -> PipelineDidNotStart:
    """The one line for a process of the user's that failed its first start."""
    return PipelineDidNotStart(f"your process `{proc.name}` {process_failure(proc, error)}")


def not_back(proc: CommandProcess, error: Exception) -> str:
    """The one line for a process of the user's that did not come back after a fault
    (its start `proc.instances`)."""
    return (
        f"your process `{proc.name}` did not come back after a fault: its start "
        f"{proc.instances} {process_failure(proc, error)}"
    )
