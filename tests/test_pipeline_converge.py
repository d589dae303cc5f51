"""A pipeline file with the user's own SQL (source statements, a store read by a query)
and the convergence wait on the real stack: a sync job that converges after its crash,
and one that never stops changing its store, whose run fails saying so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pipeline_support import RESTLESS, looping, run_text, settings

from harness import exitcodes
from harness.app.pipeline import PipelineResult
from harness.services.stack import Stack

pytestmark = [pytest.mark.services, pytest.mark.slow]

OWN_SQL = (
    """
name = "sync-job"
services = ["postgres"]
recovery = 2.0

[source]
create = \"\"\"
CREATE TABLE {source.table} (id text PRIMARY KEY, body text, rev bigint NOT NULL);
CREATE TABLE {namespace}.derived (id text PRIMARY KEY, body text, rev bigint)
\"\"\"
write = \"\"\"
INSERT INTO {source.table} AS t (id, body, rev) VALUES ({key}, {value}, 1)
ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, rev = t.rev + 1 RETURNING rev
\"\"\"
read = "SELECT id, body, rev FROM {source.table}"

[processes.sync]
"""
    + looping('psql "$DSN" -X -q -c "$SYNC" || true', 0.2)
    + """
[processes.sync.env]
DSN = "{postgres.dsn}"
SYNC = '''
INSERT INTO {namespace}.derived SELECT * FROM {source.table}
ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, rev = EXCLUDED.rev'''

[stores.copy]
sql = { query = "SELECT id, body, rev FROM {namespace}.derived" }

[[faults]]
kind = "crash"
target = "sync"
at = 1.0
duration = 1.0
"""
    + settings(clients=2, keys=6, rate=50, duration=5, timeout=15, window=2)
)

IDLE = """
name = "idle"
services = ["postgres", "redis"]

[processes.consumer]
command = ["sleep", "300"]

[stores.cache]
redis = { pattern = "{namespace}:cache:*" }
""" + settings(clients=1, keys=3, rate=20, duration=2, timeout=5, window=1)


def run(tmp_path: Path, stack: Stack, text: str) -> PipelineResult:
    return run_text(tmp_path, stack, text, "pipeline.toml", seed=2, analyze=False)


def test_own_sql_source_and_store_converge_after_a_crash(stack: Stack, tmp_path: Path) -> None:
    out = run(tmp_path, stack, OWN_SQL)
    r = out.run
    assert r.error is None and r.exit_code == exitcodes.OK, r.error
    assert out.not_converged == []
    assert r.fault_windows == 1 and not r.fault_errors
    events = [
        json.loads(line) for f in (r.run_dir / "history").glob("*.jsonl") for line in f.open()
    ]
    oks = [e for e in events if e["type"] == "op" and e["phase"] == "ok" and e["f"] == "write"]
    # The user's RETURNING rev is the version of every write.
    assert oks and all(isinstance(e.get("version"), int) for e in oks)
    state = {
        (e["store"], e["key"]): (e["value"], e.get("version"))
        for e in events
        if e["type"] == "state" and e.get("key")
    }
    source = {k: v for (store, k), v in state.items() if store == "source"}
    copy = {k: v for (store, k), v in state.items() if store == "copy"}
    assert len(source) == 6 and copy == source


def test_a_store_that_never_settles_fails_the_run(stack: Stack, tmp_path: Path) -> None:
    out = run(tmp_path, stack, RESTLESS)
    r = out.run
    (div,) = out.not_converged
    assert div.store == "cache" and "k0" in div.keys and not div.settled
    assert r.exit_code == exitcodes.VERDICT
    assert "still changing when the wait ended" in r.error


def test_a_store_never_seen_holding_a_key_says_to_check_its_reader(
    stack: Stack, tmp_path: Path
) -> None:
    out = run(tmp_path, stack, IDLE)
    (div,) = out.not_converged
    assert div.never_held and div.settled and div.keys == ["k0", "k1", "k2"]
    assert "no key was ever seen in it: check how [stores.cache] reads it" in out.run.error
    summary = json.loads((out.run.run_dir / "logs" / "run.json").read_text())
    assert summary["error"] == out.run.error and summary["exit_code"] == exitcodes.VERDICT
    assert summary["not_converged"][0]["never_held"] is True
