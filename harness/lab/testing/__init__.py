"""Support for tests and benchmarks, never used by a run: generators of histories with
known anomalies (`synthetic`). Unlike the history library it may use the checkers (to
know every anomaly kind)."""
