"""Event sourcing on PostgreSQL (C11, C12): an append-only log, validated commands, projections.

setup.py the `Setup`; projector.py the projector process; sim.py the simulator twin;
replay.py the replay driver; scenarios.py the claims' scenarios.
"""
