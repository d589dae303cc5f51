"""Work queue (C7): an AMQP queue on RabbitMQ with competing consumers and manual acks.

setup.py the `Setup`; worker.py the worker process; sim.py the simulator twin;
replay.py the replay driver; scenarios.py the claims' scenarios.
"""
