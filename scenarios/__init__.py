"""The claims catalogue: the scenario model and the registry that gathers every
architecture's scenarios (harness/architectures/<arch>/scenarios.py)."""
