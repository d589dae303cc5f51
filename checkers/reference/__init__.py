"""Plain-Python checkers over small histories: the specification that runs.

Each module `checkers.reference.<checker>` has `check(events) -> list[Anomaly]`.
"""
