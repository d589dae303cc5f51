"""Change data capture: the application writes PostgreSQL only; Debezium carries every
committed change through Kafka to consumer processes that apply it to Redis.

    client -> PostgreSQL <ns>.items --(pgoutput, Debezium on Kafka Connect)--> Kafka topic
    dbz_<ns>.<ns>.items (key-partitioned) --> consumer process(es) --> Redis (cache | counter)

This is the log-based pipeline of DDIA chapter 11 (claims C3, C4, C5, C8, C15): the
database's commit order becomes the log's order per key, and the consumers' guarantees
depend on when they commit offsets and whether their effect is idempotent.

Parameters (scenario `setup_params`):

- `effect`: `versioned` (default: idempotent, a newer source version overwrites, an older
  one is skipped; store `cache`) or `counter` (INCR per change, not idempotent; store
  `counter`). With `counter` a client's write is an increment of the source row
  (`f = increment`, value = the new total), as docs/checkers.md describes counters.
- `commit`: `after-apply` (default) or `before-apply` (the planted bug of C4).
- `commit_ms`: how often an after-apply consumer commits (default 500).
- `partitions`: partitions of the change topic (default 1); Debezium keys events by the
  row's primary key, so a key always lands on one partition.
- `consumers`: consumer processes (default 1), partitions dealt round-robin; with as
  many consumers as partitions each owns one. They are named `consumer-0`, ... and
  together `consumer`: a `crash`, `pause` or `restart` fault targets either.
- `batch`, `apply_ms`: messages per poll (default 100) and the consumer's own work per
  message in ms (default 0).
- `store_timeout_ms`: the consumer's Redis timeout (default 2000); a Toxiproxy `cut`
  stalls the link rather than refusing it, so only a timeout shorter than the cut
  makes the consumer notice.

Every consumer reaches Kafka through the Toxiproxy link `consumer->kafka` and Redis
through `consumer->redis` (a `cut` fault may target `consumer->redis`); Connect reaches
PostgreSQL through `connect->postgres`; the application through `app->postgres`.

Each run has its own table, topic, connector, replication slot, publication and Debezium
server name (the topic prefix `dbz_<ns>`, which names its JMX metrics: a killed run's
connector, still registered, once made every later run's connector fail to register
them); teardown removes the connector, the slot and the publication so a
shared PostgreSQL keeps no WAL for finished runs (the table and topic stay).

Quiesce audits the topic (a `produce` per change event and the log audit, see
audit.py), then waits until every consumer has processed and committed up to the end
offsets and records `consumer-done` for the group.

What it shares with the other setups that capture a table is in this package's public
parts: `Wiring` (wiring.py), `Capture` (capture.py), `CdcPipeline` (pipeline.py: the
capture and the consumer processes; `PipelineSetup`, the setup methods it answers),
`audit_topic` (audit.py) and `CdcClient`.
"""

from __future__ import annotations

from driftlab.harness.lab.setups.base import SetupContext
from driftlab.harness.lab.setups.stores import CACHE
from driftlab.scenarios.architectures.cdc.client import CdcClient
from driftlab.scenarios.architectures.cdc.pipeline import (
    CdcPipeline,
    ConsumerOptions,
    PipelineSetup,
)
from driftlab.scenarios.architectures.cdc.protocol import COUNTER
from driftlab.scenarios.architectures.cdc.wiring import Wiring

COUNTER_STORE = "counter"


class Cdc(PipelineSetup):
    """PostgreSQL -> Debezium -> Kafka -> consumer processes -> Redis."""

    name = "cdc"

    def __init__(self) -> None:
        super().__init__()
        self.stores = (CACHE,)

    def prepare(self, ctx: SetupContext) -> None:
        """The run's table, topic, connector (streaming) and consumer processes (not
        started yet)."""
        self.ctx = ctx
        options = ConsumerOptions.from_params(self.name, ctx.params)
        counter = options.effect == COUNTER
        store = COUNTER_STORE if counter else CACHE
        self.stores = (store,)
        self.wiring = Wiring.of(self.name, ctx, store, counter=counter)
        self.wiring.create_source()
        self.pipeline = CdcPipeline(ctx, self.wiring, "items", options)
        self.pipeline.open()

    def client(self, process: str) -> CdcClient:
        """A client writing the source only."""
        assert self.wiring is not None
        return CdcClient(self.wiring, self.context.recorder, process)
