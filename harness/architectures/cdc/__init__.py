"""Change data capture (C3-C5, C8, C15): PostgreSQL -> Debezium -> Kafka -> consumers -> Redis.

setup.py the `Setup`; consumer.py the consumer process; sim.py the simulator twin;
replay.py the replay driver; scenarios.py the claims' scenarios.
"""
