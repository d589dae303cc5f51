"""What every architecture under test builds on: the `Setup`/`Client` contract (base.py),
connections through the stack's links (connect.py), the shared store plumbing
(stores.py), application instances and supervised workers as OS processes
(app_process.py, worker_process.py) and stepped processes (stepping.py).

The architectures themselves are in scenarios/architectures/, listed once in
driftlab.scenarios.catalogue.architectures; docs/scenarios.md describes the interface.
"""
