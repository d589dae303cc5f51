"""Synthetic histories with planted anomalies of exactly known counts.

The history has the shape of a real run: client processes write account balances to the
source (some writes fail, some end `info`), each followed by a dual write to the store
`dw` and, often, a read of it; a CDC pipeline (channel `cdc.kv`, consumer `g1`) applies
every committed write to `cache`; an AMQP queue (`amqp.kv`, consumer `q1`) applies it to
`search`; an outbox publishes each change as an event-sourcing event (`events:account`,
delta and sequence number) whose projection `projection:balance` holds the balances; a
low-volume `audit` channel has its own consumer; a produce-only `mirror` channel; fault
windows; marks; and the final states of every store.

Each anomaly kind of docs/checkers.md is planted by a small, local change to that clean
history (a missing apply, a swapped delivery, a doctored final state, ...), each on its
own key, offset or partition so that plants do not interact. Some plants necessarily
show as a second kind too (an out-of-order apply is also a contradictory order);
`IMPLIED` lists those, and `generate_history` returns the counts a correct checker suite
finds, every kind included.

Everything is vectorized (numpy, pyarrow) over the writes. The events are not held all
at once: each block of them is cut by time into segments spilled to a scratch folder of
the run (lz4 Arrow IPC), and the segments are sorted one at a time into the history, so
memory is the writes' arrays and one segment, and the history is the same as one sort of
every event would make. It is written as `history.parquet` directly, with the reader's
metadata, or as JSON-lines segments (one per writer) for small histories that should
exercise the reader.

Where each part is: `run` writes the run folder, `history` assembles the events from
`clients`, `cdc`, `amqp`, `producers`, `faults` and `final_states` (one module per
pipeline and the plants on it), `plants` names what can be planted, `writes` holds the
committed writes the pipelines follow, `blocks` the spilled segments and `arrays` the
vectorized steps.
"""

from driftlab.harness.lab.testing.synthetic.plants import IMPLIED, expected_counts
from driftlab.harness.lab.testing.synthetic.run import SyntheticRun, generate, generate_history

__all__ = ["IMPLIED", "SyntheticRun", "expected_counts", "generate", "generate_history"]
