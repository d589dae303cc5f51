"""A log-compacted change topic and a store rebuilt from it (C9).

setup.py the `Setup`; sim.py the simulator twin; replay.py the replay driver;
scenarios.py the claims' scenarios.
"""
