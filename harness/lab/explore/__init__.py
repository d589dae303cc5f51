"""The driftlab simulator and the Hypothesis search of interleavings.

The simulator is a tool of its own, never a stand-in for a real run: a deterministic,
in-process model of each setup, driven one step at a time by a schedule, that writes
the same history schema as a real run so the same reference checkers judge it.
`search` looks for a schedule that breaks a property and shrinks it to its smallest
form; `driftlab replay` later runs that schedule on the real stack.
"""
