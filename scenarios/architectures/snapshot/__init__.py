"""Snapshot, then stream (C10): a new view from a consistent snapshot plus the change stream.

setup.py the `Setup`; scenarios.py the claims' scenarios.
"""
