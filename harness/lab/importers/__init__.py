"""Importers: histories recorded by other tools, turned into driftlab run folders.

`jepsen` converts a Jepsen (or Maelstrom) kafka-workload history into driftlab's
history schema (docs/jepsen.md); `edn` is the streaming EDN reader it uses. They write
through `driftlab.harness.history` and never import the checkers, the runner or the reports.
"""
