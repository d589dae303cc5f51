"""Change data capture (C3-C5, C8, C15): PostgreSQL -> Debezium -> Kafka -> consumers -> Redis.

setup.py the `Setup`; consumer.py the consumer process (protocol.py what passes between
it and the harness, processes.py the harness's side of it); sim.py the simulator twin;
replay.py the replay driver; scenarios.py the claims' scenarios.

The parts the other setups that capture a table hold (outbox, snapshot-stream,
compacted-log) are public: wiring.py (`Wiring`), capture.py (`Capture`), pipeline.py
(`CdcPipeline`, `ConsumerOptions`), audit.py (`audit_topic`) and client.py (`CdcClient`).
"""
