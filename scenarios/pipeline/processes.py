"""A pipeline's own processes, as the nemesis crashes and restarts them.

A process of the user's that does not come back after a scheduled crash (or restart) is
a finding about the pipeline, as a store that does not converge is: not a fault the lab
failed to heal. So a restart that is not ready in time is handed to `not_back` (the
setup keeps it, and the verdict fails the run with it: driftlab.checkers.verdict) instead of
raising into the nemesis, which would call the lab failed. The first start still raises: a
pipeline that never started is said so before the workload.
"""

from __future__ import annotations

from collections.abc import Callable

from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.command import CommandProcess
from driftlab.harness.lab.services.image_process import ImageProcess


class _ComesBack:
    """Mixin of a CommandProcess: a later start that is not ready goes to `not_back`."""

    not_back: Callable[[CommandProcess, ServiceError], None] | None = None
    instances: int

    def wait_healthy(self, timeout: float | None = None) -> None:
        try:
            super().wait_healthy(timeout)  # type: ignore[misc]
        except ServiceError as exc:
            if self.instances <= 1 or self.not_back is None:
                raise
            self.not_back(self, exc)  # type: ignore[arg-type]


class PipelineCommand(_ComesBack, CommandProcess):
    """A process of the pipeline file run as a command on this machine."""


class PipelineImage(_ComesBack, ImageProcess):
    """A process of the pipeline file run as a container of its image."""
