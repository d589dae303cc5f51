"""driftlab: a consistency test harness and fault-injection lab for data-integration
architectures.

Everything installed lives under this one name (the repository's `harness/`,
`checkers/`, `reports/` and `scenarios/` are `driftlab.harness`, ...). This facade
names what a user's own code imports; each is loaded on first use, so `import driftlab`
loads nothing else (no Spark, no services). The pytest plugin registers itself on
install (`pytest11` entry point): its fixtures need no import.

    from driftlab import Setup, Client, SetupContext   # the contract of a setup
    from driftlab import Scenario, WorkloadSpec        # a scenario of your own
    from driftlab import load_pipeline                 # a pipeline file, checked
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from driftlab.harness.app.outcome import Outcome
    from driftlab.harness.lab.scenario import ABSENT, PRESENT, Scenario
    from driftlab.harness.lab.setups.base import Client, Setup, SetupContext
    from driftlab.harness.lab.workload.spec import WorkloadSpec
    from driftlab.scenarios.pipeline.spec import Pipeline, PipelineError
    from driftlab.scenarios.pipeline.spec import load as load_pipeline

__all__ = [
    "ABSENT",
    "PRESENT",
    "Client",
    "Outcome",
    "Pipeline",
    "PipelineError",
    "Scenario",
    "Setup",
    "SetupContext",
    "WorkloadSpec",
    "__version__",
    "load_pipeline",
]

# Where each public name is defined: its module, then its name there when that differs.
_MODULES = {
    "driftlab.harness": ("__version__",),
    "driftlab.harness.app.outcome": ("Outcome",),
    "driftlab.harness.lab.scenario": ("ABSENT", "PRESENT", "Scenario"),
    "driftlab.harness.lab.setups.base": ("Client", "Setup", "SetupContext"),
    "driftlab.harness.lab.workload.spec": ("WorkloadSpec",),
    "driftlab.scenarios.pipeline.spec": ("Pipeline", "PipelineError", "load_pipeline"),
}
_RENAMED = {"load_pipeline": "load"}
_SOURCES = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562)."""
    if name not in _SOURCES:
        raise AttributeError(f"module 'driftlab' has no attribute {name!r}")
    module = importlib.import_module(_SOURCES[name])
    value = getattr(module, _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
