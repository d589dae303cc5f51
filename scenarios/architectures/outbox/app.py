"""One outbox application instance, an OS process of its own.

    python -m driftlab.scenarios.architectures.outbox.app   # started by
    driftlab.scenarios.architectures.outbox.setup

The instance holds its PostgreSQL connection (on `app->postgres`) and makes the
application's one transaction in two requests, so that the nemesis's `app-crash` is a
SIGKILL of this process between the two writes, with the transaction open: the server
rolls it back when the dead process's connection drops, and nothing of it was sent as
a ROLLBACK. The harness's client thread drives the instance one request at a time (one
JSON line on stdin, one on stdout, driftlab.scenarios.architectures.dual_write.app.serve) and
records the
history.

Requests (`do`): `begin` (key, value: None is a tombstone) runs BEGIN and the business
row's upsert and answers `version`; `commit` (key, value, version) appends the outbox
row and commits. A failed call answers `phase` (`fail` or `info`, see Outcome) and
`error`, and drops the connection with its transaction. The process exits when stdin
closes, also when the harness dies, so no instance outlives its run.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from psycopg import sql

from driftlab.harness.lab.setups.app_process import APP_CONFIG_ENV, serve
from driftlab.harness.lab.setups.stores import UPSERT, AppConnection, Outcome

OUTBOX_INSERT = "INSERT INTO {outbox} (key, value, version) VALUES (%s, %s, %s)"


class OutboxApp:
    """The transaction of one instance, on a connection it opens when first needed."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.conninfo: str = cfg["pg"]
        self.items = sql.Identifier(*cfg["items"])
        self.outbox = sql.Identifier(*cfg["outbox"])
        self.pg = AppConnection(self.conninfo)

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one request; a failed store call raises its Outcome (`serve` answers it)."""
        if request["do"] == "begin":
            return {"version": self.begin(request["key"], request["value"])}
        if request["do"] == "commit":
            self.commit(request["key"], request["value"], request["version"])
            return {}
        raise Outcome("fail", f"the outbox application has no request {request['do']!r}")

    def begin(self, key: str, value: str | None) -> int:
        """Open the transaction and upsert the business row; its new version."""
        with self.pg.failing() as conn:
            conn.execute("BEGIN")
            row = conn.execute(sql.SQL(UPSERT).format(table=self.items), (key, value)).fetchone()
        assert row is not None
        return int(row[0])

    def commit(self, key: str, value: str | None, version: int) -> None:
        """Append the outbox row of the open transaction and commit it."""
        if not self.pg.is_open:
            raise Outcome("fail", "no transaction is open: `begin` failed or was not sent")
        # A failed call drops the connection with its transaction (the outcome of a
        # COMMIT that got no answer is unknown: `info`).
        with self.pg.failing() as conn:
            conn.execute(sql.SQL(OUTBOX_INSERT).format(outbox=self.outbox), (key, value, version))
            conn.execute("COMMIT")


def main() -> int:
    """Serve the outbox application's requests until stdin closes."""
    return serve(OutboxApp(json.loads(os.environ[APP_CONFIG_ENV])).handle)


if __name__ == "__main__":
    sys.exit(main())
