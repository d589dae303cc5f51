"""driftlab's runtime: services, setups, workloads, faults, history, runner and CLI."""

__version__ = "0.1.0"
