"""The nemesis: faults composed in time against the stack and the setup of a run."""

from harness.nemesis.nemesis import Nemesis
from harness.nemesis.schedule import FAULT_KINDS, FaultSpec, Schedule, periodic

__all__ = ["FAULT_KINDS", "FaultSpec", "Nemesis", "Schedule", "periodic"]
