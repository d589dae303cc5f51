"""The catalogue: the registry of architectures (their setups, simulators and
replay drivers) and of every scenario, looked up by name."""
