"""The import names: everything installed lives under `driftlab`, each of the
repository's top folders one subpackage of it (`harness/` is `driftlab.harness`), so a
project's own `reports` or `scenarios` package never meets driftlab's. pyproject.toml's
`packages.find` cannot rename what it finds; the rest of the metadata is there."""

from setuptools import find_namespace_packages, setup

TOPS = ("harness", "checkers", "reports", "scenarios")
# Namespace discovery, as pyproject's `packages.find` does: reports/templates and
# reports/static are data folders without an `__init__.py`.
FOUND = find_namespace_packages(include=[f"{t}*" for t in TOPS], exclude=["*__pycache__*"])

setup(
    packages=["driftlab", *(f"driftlab.{name}" for name in FOUND)],
    package_dir={"driftlab": "driftlab", **{f"driftlab.{t}": t for t in TOPS}},
)
