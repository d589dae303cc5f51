"""Jepsen kafka-workload histories as driftlab run folders.

`import_history(path, run_dir)` streams a history written by Jepsen's kafka workload
(`jepsen.tests.kafka`, also used by Maelstrom's kafka workload) and records it in
driftlab's history schema (docs/history.md) as one segment of `run_dir`, with a
config.json whose expectations forbid the kinds that are errors in Jepsen's checker. The
mapping, op by op, and how each driftlab kind relates to Jepsen's anomaly names are in
docs/jepsen.md; `JEPSEN_NAMES` is that table for the report.

Input is `history.edn` (one op per line as Jepsen's store writes it, `#jepsen.history.Op`
records included, or one vector of ops) or JSON as elle-cli and Maelstrom tooling write
it (an array with one op per line, or JSON lines). The file is read in chunks: memory
holds the operations in flight and the keys, never the history.

Where each part is: `importer` (import_history, the config), `reading` (the file as
ops), `convert` (client ops to events), `nemesis` (fault windows), `values` (Jepsen
values as text), `kinds` (Jepsen's names for driftlab's kinds).
"""

from driftlab.harness.lab.importers.jepsen.importer import SCENARIO, ImportSummary, import_history
from driftlab.harness.lab.importers.jepsen.kinds import FORBIDDEN, JEPSEN_NAMES, REBALANCE_ALLOWED
from driftlab.harness.lab.importers.jepsen.reading import JepsenImportError

__all__ = [
    "FORBIDDEN",
    "JEPSEN_NAMES",
    "REBALANCE_ALLOWED",
    "SCENARIO",
    "ImportSummary",
    "JepsenImportError",
    "import_history",
]
