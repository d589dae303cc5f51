"""Every simulated setup by name: the simulator twins of the architecture registry."""

from __future__ import annotations

from harness.architectures.registry import ARCHITECTURES
from harness.explore.spec import SetupSpec

SETUPS: dict[str, SetupSpec] = {s.name: s for arch in ARCHITECTURES for s in arch.sims}
"""Simulated setup name -> its spec, in registry order."""


def get_setup(name: str) -> SetupSpec:
    """The setup of that name, or a ValueError listing the known ones."""
    try:
        return SETUPS[name]
    except KeyError:
        raise ValueError(f"unknown setup {name!r}: choose one of {', '.join(SETUPS)}") from None
