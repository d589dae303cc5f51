"""Plain-Python checkers over small histories: the specification that runs.

Each module `driftlab.checkers.reference.<checker>` has `check(events) -> list[Anomaly]`;
`CHECKERS` holds them by name, in the order of driftlab.checkers.anomaly.KINDS.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from driftlab.checkers.anomaly import KINDS

CHECKERS: dict[str, ModuleType] = {
    name: importlib.import_module(f"driftlab.checkers.reference.{name}") for name in KINDS
}
