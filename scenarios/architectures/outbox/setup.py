"""The transactional outbox: the business row and an outbox row in one PostgreSQL
transaction; Debezium captures the outbox table only; a consumer applies its events.

    client: BEGIN; upsert <ns>.items; [step point]; INSERT <ns>.outbox; COMMIT
    Debezium (outbox table only) -> Kafka dbz_<ns>.<ns>.outbox -> consumer -> Redis cache

The two writes commit or roll back together, so the crash point that splits a dual
write (`after-source-write`, claim C2) here kills the transaction: nothing of it reaches
either table, and the derived store follows the one order the database committed
(claim C14). Everything else (consumer processes, links, audit, quiesce, faults on
`consumer` and `consumer->redis`) is the CDC pipeline's
(driftlab.scenarios.architectures.cdc.pipeline),
with the cdc setup's parameters; the effect is always `versioned`, and an event's
`msg_id` is its outbox id (`event-<id>`).

Each application instance (a workload client) is an OS process of its own
(driftlab.scenarios.architectures.outbox.app) holding its PostgreSQL connection; its client thread
drives it through the transaction's two halves and records the history. An `app-crash`
fault SIGKILLs the instance at the step point, with its transaction open (`kill_app`):
PostgreSQL rolls it back when the connection drops, the application cannot know, and
the write is recorded as `info`; then the workload starts a new instance. A hook that
raises AppCrash there (a test's, a replay's) is made a SIGKILL too. Reads stay in the
client thread, on its own connections (a `CdcClient` of the cdc package).
"""

from __future__ import annotations

import contextlib

from psycopg import sql

from driftlab.harness.lab.setups.app_process import (
    AFTER_SOURCE_WRITE,
    AppDied,
    AppInstances,
    AppProcess,
)
from driftlab.harness.lab.setups.base import AppCrash, SetupContext, SourceChangeClient
from driftlab.harness.lab.setups.connect import direct_pg_connect
from driftlab.harness.lab.setups.stores import CACHE, Outcome
from driftlab.scenarios.architectures.cdc.client import CdcClient
from driftlab.scenarios.architectures.cdc.pipeline import (
    CdcPipeline,
    ConsumerOptions,
    PipelineSetup,
)
from driftlab.scenarios.architectures.cdc.protocol import VERSIONED
from driftlab.scenarios.architectures.cdc.wiring import Wiring

OUTBOX_APP_MODULE = "driftlab.scenarios.architectures.outbox.app"
OUTBOX = "outbox"
"""The outbox table, the one Debezium captures."""


class Outbox(PipelineSetup):
    """Business table + outbox table in one transaction; CDC on the outbox only."""

    name = "outbox"
    stores = (CACHE,)

    def __init__(self) -> None:
        super().__init__()
        self.apps = AppInstances(OUTBOX_APP_MODULE)

    def prepare(self, ctx: SetupContext) -> None:
        """The business and outbox tables, the outbox's capture and the consumer
        processes (not started yet); the cdc setup's parameters, `effect` fixed."""
        if ctx.params.get("effect", VERSIONED) != VERSIONED:
            raise ValueError("outbox: the consumer's effect is versioned; drop `effect`")
        self.ctx = ctx
        options = ConsumerOptions.from_params(self.name, ctx.params)
        self.wiring = Wiring.of(self.name, ctx, CACHE)
        self.wiring.create_source()
        with direct_pg_connect(self.wiring.pg_direct) as conn:
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (id bigserial PRIMARY KEY, key text NOT NULL, value text, "
                    "version bigint NOT NULL)"
                ).format(self.wiring.table(OUTBOX))
            )
        self.pipeline = CdcPipeline(ctx, self.wiring, OUTBOX, options, id_field="id")
        self.pipeline.open()

    def client(self, process: str) -> OutboxClient:
        """A client driving an application instance of its own (started on first write)."""
        return OutboxClient(self, process)

    def spawn_app(self, process: str) -> AppProcess:
        """Start the application instance `process`, on the app's link to PostgreSQL."""
        assert self.wiring is not None
        ns = self.context.namespace
        config = {"pg": self.wiring.pg_app, "items": [ns, "items"], "outbox": [ns, OUTBOX]}
        return self.apps.spawn(process, config, self.context.logs / "app.log")

    def kill_app(self, process: str) -> int | None:
        """SIGKILL the application instance `process` and return its pid (None: no
        instance of that name runs)."""
        return self.apps.kill(process)

    def teardown(self) -> None:
        """End leftover application instances, stop the consumers, drop the capture."""
        self.apps.close_all()
        super().teardown()


class OutboxClient(SourceChangeClient):
    """One application instance of the outbox setup; its reads are a `CdcClient`'s."""

    def __init__(self, setup: Outbox, process: str) -> None:
        assert setup.wiring is not None
        super().__init__(setup.context.recorder, process)
        self.setup = setup
        self.reads = CdcClient(setup.wiring, self.rec, process)
        self._app: AppProcess | None = None

    def ready(self) -> None:
        """Start the application instance and wait until it listens (a death at start
        is met by the first operation)."""
        if self._app is None:
            self._app = self.setup.spawn_app(self.process)
        with contextlib.suppress(AppDied):
            self._app.wait_ready()

    def read(self, key: str, store: str) -> None:
        """Read `key` from the business table or the cache."""
        self.reads.read(key, store)

    def close(self) -> None:
        """End the application instance (a killed one is gone already) and the reads'
        connections."""
        self.setup.apps.close(self.process)
        self.reads.close()

    def change(self, op: str, key: str, value: str | None) -> None:
        """Upsert the business row (for None a tombstone row) and append its outbox event
        (value null), in one transaction."""
        setup = self.setup
        if self._app is None:
            self._app = setup.spawn_app(self.process)
        try:
            version = int(self._app.call(do="begin", key=key, value=value)["version"])
            try:
                setup.context.steps.reach(AFTER_SOURCE_WRITE, self.process, key)
            except AppCrash:
                # A crash raised by a hook: made real, the instance dies mid-transaction.
                setup.kill_app(self.process)
            # After a SIGKILL at the step point this call finds the process dead.
            self._app.call(do="commit", key=key, value=value, version=version)
        except AppDied as died:
            # No ROLLBACK was sent: the server rolls back when the connection drops,
            # the application never learns the outcome.
            self.rec.complete(op, "info", error="application crashed mid-transaction")
            raise AppCrash(str(died)) from died
        except Outcome as o:
            self.rec.complete(op, o.phase, error=str(o))
            return
        self.rec.complete(op, "ok", version=version)
