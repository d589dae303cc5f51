"""Dual write (C1, C2): the application writes PostgreSQL, then Redis and a search index.

setup.py the `Setup`; app.py an application instance (an OS process); sim.py the
simulator twin; replay.py the replay driver; scenarios.py the claims' scenarios.
"""
