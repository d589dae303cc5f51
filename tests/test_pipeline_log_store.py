"""A log store (an audit table): every write must arrive. driftlab records each row it
sees appear as an apply, so the checkers' lost-write names the writes a mover dropped,
and a mover that drops none passes."""

from __future__ import annotations

from pathlib import Path

import pytest
from pipeline_support import assert_passed, looping, lost_by_name, run_text, settings

from driftlab.harness.app.pipeline import PipelineResult
from driftlab.harness.lab.services.stack import Stack

pytestmark = [pytest.mark.services, pytest.mark.spark, pytest.mark.slow]

AUDIT = """
name = "audit-{variant}"
services = ["postgres"]

[source]
create = \"\"\"
CREATE TABLE {{source.table}} (key text PRIMARY KEY, value text, version bigint NOT NULL);
CREATE TABLE {{namespace}}.pending (key text, value text);
CREATE TABLE {{namespace}}.audit (key text, value text)
\"\"\"
write = \"\"\"
WITH w AS (
  INSERT INTO {{source.table}} AS t (key, value, version) VALUES ({{key}}, {{value}}, 1)
  ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, version = t.version + 1
  RETURNING key, value, version),
p AS (INSERT INTO {{namespace}}.pending SELECT key, value FROM w)
SELECT version FROM w
\"\"\"
read = "SELECT key, value, version FROM {{source.table}}"

[processes.mover]
{mover}
[processes.mover.env]
DSN = "{{postgres.dsn}}"
MOVE = '''
WITH moved AS (DELETE FROM {{namespace}}.pending RETURNING key, value)
INSERT INTO {{namespace}}.audit SELECT key, value FROM moved WHERE {keep}'''

[stores.audit]
kind = "log"
sql = {{ query = "SELECT key, value FROM {{namespace}}.audit" }}

[[faults]]
kind = "crash"
target = "mover"
at = 1.0
duration = 1.0

[expect]
absent = ["lost-write", "duplicate-apply"]
"""

MOVER = looping('psql "$DSN" -X -q -c "$MOVE" || true', 0.2)
SETTINGS = settings(clients=2, keys=5, rate=40, duration=4, timeout=10, window=2)


def run(tmp_path: Path, stack: Stack, variant: str, keep: str) -> PipelineResult:
    text = AUDIT.format(variant=variant, keep=keep, mover=MOVER) + SETTINGS
    return run_text(tmp_path, stack, text, f"{variant}.toml", seed=6)


def test_every_write_arrives_in_the_audit_log(stack: Stack, spark: object, tmp_path: Path) -> None:
    out = run(tmp_path, stack, "mover", "true")
    assert_passed(out)


def test_a_mover_that_drops_rows_loses_writes_by_name(
    stack: Stack, spark: object, tmp_path: Path
) -> None:
    # Planted: the mover deletes every pending row but copies only values not ending in 7.
    out = run(tmp_path, stack, "dropper", "value NOT LIKE '%7'")
    lost, div = lost_by_name(out, "audit")
    assert all("never reached audit" in row["detail"] for row in lost)
    assert out.not_converged == [div] and div.log and div.settled
    assert "key(s) with writes that never arrived" in out.run.error
