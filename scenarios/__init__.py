"""The claims catalogue: the scenario model and the registry that gathers every
architecture's scenarios (scenarios/architectures/<arch>/scenarios.py)."""
