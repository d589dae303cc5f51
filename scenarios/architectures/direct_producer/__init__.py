"""Acknowledged produce (C16): the application is a Kafka producer, the log its record.

setup.py the `Setup`; scenarios.py the claims' scenarios.
"""
