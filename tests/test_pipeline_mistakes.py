"""A mistake in a pipeline file is not a failure of the lab, nor an anomaly of the
pipeline: each found before the workload is exit 2 with one line naming the field and
the fix, and leaves no run folder; a process of the user's that fails its first start is
the pipeline not starting (exit 1, in its own words); a store that cannot be read at the
final reading makes the run inconclusive, naming it. Each runs the real `driftlab run`
on a stack of `driftlab up --dir`, as a user would."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import DRIFTLAB
from lab_support import stack_folder, up
from pipeline_support import settings

from driftlab.harness.history import exitcodes

pytestmark = [pytest.mark.services, pytest.mark.slow]


@pytest.fixture(scope="module")
def stack() -> Iterator[Path]:
    """The folder of a stack of `driftlab up --dir` (PostgreSQL, Redis), stopped at the end."""
    with stack_folder() as root:
        up(root, "postgres,redis")
        yield root


BASE = """
name = "mistake"
services = ["postgres", "redis"]
{external}

[source]
{source}

[processes.mirror]
command = ["bash", "-c", '''{script}''']
ready = {{ log = "^ready$" }}
env = {{ DSN = "{{postgres.dsn}}" }}

[stores.copy]
sql = {{ query = "{query}" }}
""" + settings(clients=1, keys=2, rate=10, duration=2, timeout=4, window=1)

OWN_TABLE = 'table = "items"'
FINE = "echo ready; exec sleep 600"
COPY = "SELECT key, value, version FROM {source.table}"


def pipeline(
    external: str = "", source: str = OWN_TABLE, script: str = FINE, query: str = COPY
) -> str:
    return BASE.format(external=external, source=source, script=script, query=query)


def run(stack: Path, tmp_path: Path, text: str) -> tuple[int, list[str], Path]:
    """`driftlab run` of `text` on `stack`: its status, the lines it printed, its runs
    folder."""
    path = tmp_path / "mistake.toml"
    path.write_text(text)
    runs = tmp_path / "runs"
    argv = [DRIFTLAB, "run", str(path), "--stack-dir", str(stack), "--no-analyze"]
    done = subprocess.run(
        [*argv, "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert not any("Traceback" in line for line in lines), lines
    return done.returncode, lines, runs


def said_by(stack: Path, tmp_path: Path, text: str, code: int) -> tuple[str, Path]:
    """`driftlab run` of `text` on `stack`, which must exit `code`: what it printed, on
    one line, and its runs folder."""
    status, lines, runs = run(stack, tmp_path, text)
    assert status == code, lines
    return " ".join(" ".join(lines).split()), runs


def run_facts(runs: Path) -> dict[str, Any]:
    """The logs/run.json of the one run in `runs`."""
    (summary,) = runs.glob("mistake/*/logs/run.json")
    return json.loads(summary.read_text())


def found_before_the_workload(stack: Path, tmp_path: Path, text: str) -> str:
    """The one line of a mistake found before the workload (exit 2, no run folder)."""
    code, lines, runs = run(stack, tmp_path, text)
    assert code == exitcodes.BAD_INPUT, lines
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert not runs.exists(), list(runs.rglob("*"))
    return lines[0]


def test_a_store_reader_that_fails_is_named_before_the_workload(
    stack: Path, tmp_path: Path
) -> None:
    text = pipeline(query="SELECT key, value, version FROM no_such_table")
    line = found_before_the_workload(stack, tmp_path, text)
    assert 'stores.copy: its reader fails before the workload: relation "no_such_table"' in line
    assert "fix how the store is read" in line


def test_a_source_write_statement_that_fails_is_named_before_the_workload(
    stack: Path, tmp_path: Path
) -> None:
    source = "\n".join(
        [
            'create = "CREATE TABLE {source.table} (key text PRIMARY KEY, value text)"',
            'write = "INSERT INTO {source.table} VALUES ({key}, {value}, 1) RETURNING 1"',
            'read = "SELECT key, value FROM {source.table}"',
        ]
    )
    line = found_before_the_workload(stack, tmp_path, pipeline(source=source))
    assert "source.write: fails on PostgreSQL: INSERT has more expressions than target" in line


def test_an_external_redis_with_a_wrong_password_is_named_before_anything_starts(
    stack: Path, tmp_path: Path
) -> None:
    state = json.loads((stack / "stack.json").read_text())
    port = state["services"]["redis"]["spec"]["ports"]["main"]
    url = f"redis://default:wrong@127.0.0.1:{port}/0"
    text = pipeline(external=f'external = {{ redis = "{url}" }}')
    text = text.replace('services = ["postgres", "redis"]', 'services = ["postgres"]')
    line = found_before_the_workload(stack, tmp_path, text)
    assert "external.redis: the password is refused" in line


def test_a_process_that_fails_its_first_start_is_the_pipeline_not_starting(
    stack: Path, tmp_path: Path
) -> None:
    script = "echo starting; echo 'cannot read /etc/mirror.conf' >&2; exit 1"
    # The pipeline's outcome, not the lab's.
    said, runs = said_by(stack, tmp_path, pipeline(script=script), exitcodes.VERDICT)
    assert (
        "your process `mirror` exited with status 1 before it was ready: starting | "
        "cannot read /etc/mirror.conf" in said
    ), said
    # The run happened up to there: its folder keeps the process's output.
    (log,) = runs.glob("mistake/*/logs/mirror.log")
    assert "cannot read /etc/mirror.conf" in log.read_text()


def test_a_store_unreadable_at_the_final_reading_makes_the_run_inconclusive(
    stack: Path, tmp_path: Path
) -> None:
    # The store's table is there before the workload, and loses its column during it:
    # a second into a 2 s workload, well before the final reading (a rename timed to
    # land after the workload raced that reading on a loaded machine).
    script = "\n".join(
        [
            'psql "$DSN" -X -q -c "CREATE TABLE {namespace}.derived'
            ' (key text, value text, version bigint)"',
            "echo ready",
            "sleep 1",
            'psql "$DSN" -X -q -c "ALTER TABLE {namespace}.derived RENAME COLUMN value TO gone"',
            "exec sleep 600",
        ]
    )
    query = "SELECT key, value, version FROM {namespace}.derived"
    # Inconclusive: the run proves nothing.
    text = pipeline(script=script, query=query)
    said, runs = said_by(stack, tmp_path, text, exitcodes.LAB_FAILED)
    assert "store copy could not be read at the final reading" in said, said
    assert 'column "value" does not exist' in said, said
    facts = run_facts(runs)
    assert facts["verdict"] == "inconclusive" and facts["exit_code"] == exitcodes.LAB_FAILED
    assert facts["inconclusive"] and "store copy" in facts["inconclusive"][0]


def test_a_process_that_does_not_come_back_after_its_crash_is_a_finding(
    stack: Path, tmp_path: Path
) -> None:
    # The second start finds the first one's lock file and gives up.
    script = "\n".join(
        [
            'if [ -e "/tmp/{namespace}.lock" ]; then',
            "  echo 'my lock file is still there' >&2; exit 1",
            "fi",
            'touch "/tmp/{namespace}.lock"; echo ready; exec sleep 600',
        ]
    )
    text = pipeline(external="recovery = 1.0", script=script).replace(
        "duration = 2", "duration = 3"
    )
    text += '\n[[faults]]\nkind = "crash"\ntarget = "mirror"\nat = 0.5\nduration = 0.5\n'
    # The pipeline's finding, not a lab failure.
    said, runs = said_by(stack, tmp_path, text, exitcodes.VERDICT)
    assert (
        "your process `mirror` did not come back after a fault: its start 2 exited with "
        "status 1 before it was ready: ready | my lock file is still there" in said
    ), said
    facts = run_facts(runs)
    assert facts["exit_code"] == exitcodes.VERDICT and not facts["lab_failures"]
    assert facts["not_back"] and "`mirror` did not come back" in facts["not_back"][0]
