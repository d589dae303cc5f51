"""A projector of the event-sourced setup: folds the event log into a projection table.

    python -m driftlab.scenarios.architectures.event_sourced.projector   # started by setup.py

It tails `<namespace>.events` in log order (`pos`) from its checkpoint, and for each
batch records a `deliver` per event, then in *one* PostgreSQL transaction adds every
delta to its projection table and moves its checkpoint, then records an `apply` per
event (value: the aggregate's new balance, version: the event's sequence number).
Projection and checkpoint commit together, so a SIGKILL anywhere leaves them agreeing:
the next instance redelivers the uncommitted batch and applies it exactly once. With
`checkpoint: periodic` (a planted bug) the checkpoint is saved on its own every
`checkpoint_ms`, as an auto-committing consumer would: a kill re-applies every batch
folded since the last save, and the projection counts those deltas twice.

Tailing by `pos` is safe because appends are serialized (see event_sourced.py): a
visible event's predecessors in `pos` order are all committed.

The projector reaches PostgreSQL through the link `projector->postgres`, and every
exchange gives up after PG_STATEMENT_TIMEOUT_S
(driftlab.harness.lab.setups.connect.TimedConnection):
a cut link no longer holds it until the heal. A failed call makes it reconnect and go
on from its saved checkpoint, as a restarted instance would: the batch whose
transaction's outcome is unknown is delivered again, and folded once (atomic) or again
(`periodic`, the planted bug, like a crash).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import Any

import psycopg
from psycopg import sql

from driftlab.harness.history.recorder import Recorder
from driftlab.harness.lab.setups.connect import TimedConnection, app_pg_connect
from driftlab.harness.lab.setups.worker_process import (
    publish_status,
    run_until_sigterm,
    worker_config,
    worker_logging,
)

log = logging.getLogger("driftlab.projector")

RETRY_S = 0.5
"""The back-off before a projector reconnects after a failed call."""


class Projector:
    """The tail-and-fold loop of one instance."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.rec = Recorder(cfg["run_dir"], role="projector", batch_size=1, flush_interval=1.0)
        schema = cfg["schema"]
        self.events = sql.Identifier(schema, "events")
        self.table = sql.Identifier(schema, cfg["table"])
        self.checkpoints = sql.Identifier(schema, "checkpoints")
        self.conn: TimedConnection = app_pg_connect(cfg["conninfo"])
        self.stopping = False
        self.pos = self._checkpoint()
        self.atomic = cfg.get("checkpoint", "atomic") == "atomic"
        self.last_save = time.monotonic()
        self.attempts: dict[str, int] = {}

    def _checkpoint(self) -> int:
        row = self.conn.execute(
            sql.SQL("SELECT pos FROM {} WHERE projector = %s").format(self.checkpoints),
            (self.cfg["name"],),
        ).fetchone()
        return int(row[0]) if row else 0

    def run(self) -> None:
        """Fold until SIGTERM; the status says how far the projection is."""
        self.status()
        while not self.stopping:
            try:
                if self.conn.closed:
                    self.resume()
                if not self.step():
                    time.sleep(self.cfg["poll_ms"] / 1000)
            except psycopg.OperationalError as exc:
                log.warning("postgres failed; resuming from the checkpoint: %s", exc)
                with contextlib.suppress(psycopg.Error):
                    self.conn.close()
                time.sleep(RETRY_S)
        self.conn.close()
        self.rec.close()

    def resume(self) -> None:
        """Reconnect and go on from the saved checkpoint."""
        self.conn = app_pg_connect(self.cfg["conninfo"])
        self.pos = self._checkpoint()
        self.status()

    def step(self) -> int:
        """Deliver, apply and checkpoint the next batch; returns its size."""
        rows = self.conn.execute(
            sql.SQL(
                "SELECT pos, aggregate, seq, delta, event_id FROM {} WHERE pos > %s "
                "ORDER BY pos LIMIT %s"
            ).format(self.events),
            (self.pos, self.cfg["batch"]),
        ).fetchall()
        if not rows:
            return 0
        for pos, aggregate, seq, delta, event_id in rows:
            attempt = self.attempts.get(event_id, 0) + 1
            self.attempts[event_id] = attempt
            self.rec.msg(
                "deliver", attempt=attempt, **self._fields(pos, aggregate, seq, delta, event_id)
            )
        balances = []
        with self.conn.transaction():
            for _pos, aggregate, seq, delta, _event_id in rows:
                row = self.conn.execute(
                    sql.SQL(
                        "INSERT INTO {t} AS p (aggregate, balance, seq) VALUES (%s, %s, %s) "
                        "ON CONFLICT (aggregate) DO UPDATE "
                        "SET balance = p.balance + EXCLUDED.balance, seq = EXCLUDED.seq "
                        "RETURNING balance"
                    ).format(t=self.table),
                    (aggregate, delta, seq),
                ).fetchone()
                assert row is not None
                balances.append(int(row[0]))
            if self.atomic:
                self.save_checkpoint(rows[-1][0])
        for (pos, aggregate, seq, delta, event_id), balance in zip(rows, balances, strict=True):
            fields = self._fields(pos, aggregate, seq, delta, event_id) | {"value": str(balance)}
            self.rec.msg("apply", store=self.cfg["store"], **fields)
        self.pos = rows[-1][0]
        due = time.monotonic() - self.last_save >= self.cfg.get("checkpoint_ms", 0) / 1000
        if not self.atomic and due:
            self.save_checkpoint(self.pos)
        self.status()
        return len(rows)

    def save_checkpoint(self, pos: int) -> None:
        """Record that the projection holds every event up to `pos`."""
        self.conn.execute(
            sql.SQL(
                "INSERT INTO {} (projector, pos) VALUES (%s, %s) "
                "ON CONFLICT (projector) DO UPDATE SET pos = EXCLUDED.pos"
            ).format(self.checkpoints),
            (self.cfg["name"], pos),
        )
        self.last_save = time.monotonic()

    def _fields(
        self, pos: int, aggregate: str, seq: int, delta: int, event_id: str
    ) -> dict[str, Any]:
        return {
            "channel": self.cfg["channel"],
            "partition": 0,
            "offset": pos,
            "msg_id": event_id,
            "key": aggregate,
            "value": str(delta),
            "version": seq,
            "consumer": self.cfg["name"],
            "process": self.cfg["instance"],
        }

    def status(self) -> None:
        """Publish the instance and the log position its projection has reached."""
        publish_status(self.cfg["status_path"], {"instance": self.cfg["instance"], "pos": self.pos})


def main() -> int:
    """Run one projector instance until SIGTERM."""
    worker_logging()
    cfg = worker_config()
    projector = Projector(cfg)
    log.info(
        "instance %s folding into %s from pos %d", cfg["instance"], cfg["table"], projector.pos
    )
    return run_until_sigterm(projector)


if __name__ == "__main__":
    sys.exit(main())
