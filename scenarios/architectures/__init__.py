"""The architectures under test, one package each, listed once in `registry`.

A package holds everything of one architecture: its `Setup` (setup.py) and the
processes it starts (consumer, worker, application instance), its simulator twin
(sim.py), its replay driver (replay.py) and its scenarios (scenarios.py). What
architectures share (the `Setup` contract, connections, store plumbing, supervised
worker processes) is in harness/lab/setups/.
"""
