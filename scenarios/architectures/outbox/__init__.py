"""The transactional outbox (C14): the business row and an outbox row in one transaction,
captured and applied by the CDC pipeline.

setup.py the `Setup` (a CDC pipeline behind an outbox table); app.py an application
instance; sim.py the simulator twin; replay.py the replay driver; scenarios.py.
"""
