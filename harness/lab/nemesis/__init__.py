"""The nemesis: faults composed in time against the stack and the setup of a run."""

from driftlab.harness.lab.nemesis.nemesis import Nemesis
from driftlab.harness.lab.nemesis.schedule import FAULT_KINDS, FaultSpec, Schedule, periodic

__all__ = ["FAULT_KINDS", "FaultSpec", "Nemesis", "Schedule", "periodic"]
