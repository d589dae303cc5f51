"""The workload: concurrent application clients writing, deleting and reading keys."""

from harness.workload.clients import Workload, WorkloadStats
from harness.workload.spec import WorkloadSpec

__all__ = ["Workload", "WorkloadSpec", "WorkloadStats"]
