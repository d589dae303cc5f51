"""The workload: concurrent application clients writing, deleting and reading keys."""

from driftlab.harness.lab.workload.clients import Workload, WorkloadStats
from driftlab.harness.lab.workload.spec import WorkloadSpec

__all__ = ["Workload", "WorkloadSpec", "WorkloadStats"]
