"""A log with bounded retention read by a fast and a slow consumer (C6).

setup.py the `Setup`; sim.py the simulator twin; replay.py the replay driver;
scenarios.py the claims' scenarios.
"""
