"""Direct messaging (C17): the producer pushes each message to the consumer over HTTP.

setup.py the `Setup`; receiver.py the receiving process; scenarios.py.
"""
