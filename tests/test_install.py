"""What installing driftlab puts on a machine: one import name, `driftlab`, whatever the
repository's folders are called. A user's project with packages of its own named
`reports` and `scenarios` uses driftlab's pytest plugin and command without either
shadowing the other; the wheel holds `driftlab` and its metadata only; `import
driftlab` is cheap and its facade names what users import."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import driftlab

ROOT = Path(__file__).resolve().parent.parent
DRIFTLAB = Path(sys.executable).with_name("driftlab")

USER_TEST = """
import sys
from pathlib import Path

import reports
import scenarios


def test_each_name_is_its_owners(driftlab_scenario, pytestconfig):
    assert reports.OWNER == "user" and scenarios.OWNER == "user"
    assert Path(reports.__file__).parent.parent == Path.cwd()
    # driftlab's plugin is loaded (its fixture and options) from driftlab's folders.
    assert callable(driftlab_scenario)
    assert pytestconfig.getoption("driftlab_seed") is None
    plugin = sys.modules["driftlab.harness.pytest_plugin"]
    assert Path(plugin.__file__).parent.name == "harness"
    from driftlab.scenarios.catalogue.registry import all_scenarios

    assert "dual-write-race" in all_scenarios()
    assert not any(Path(m.__file__ or "").is_relative_to(Path.cwd())
                   for name, m in sys.modules.items()
                   if name.startswith("driftlab") and getattr(m, "__file__", None))
"""


@pytest.fixture
def user_project(tmp_path: Path) -> Path:
    """A project of a user's own: packages `reports` and `scenarios`, a conftest that
    imports them, a test that uses driftlab's plugin."""
    for package in ("reports", "scenarios"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text('OWNER = "user"\n')
        (tmp_path / package / "render.py").write_text("raise ImportError('the user\\'s')\n")
    (tmp_path / "conftest.py").write_text("import reports\nimport scenarios\n")
    (tmp_path / "test_mine.py").write_text(USER_TEST)
    return tmp_path


def _user_env(project: Path) -> dict[str, str]:
    # The project's packages on the path ahead of everything, as an installed project's are.
    return {**os.environ, "PYTHONPATH": str(project)}


@pytest.mark.slow
def test_a_project_with_its_own_reports_and_scenarios_runs_the_plugin(user_project: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_mine.py"],
        cwd=user_project,
        env=_user_env(user_project),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


@pytest.mark.slow
def test_a_project_with_its_own_reports_and_scenarios_runs_the_command(
    user_project: Path,
) -> None:
    env = _user_env(user_project)
    helped = subprocess.run(
        [DRIFTLAB, "--help"], cwd=user_project, env=env, capture_output=True, text=True
    )
    assert helped.returncode == 0, helped.stderr
    assert "analyze" in helped.stdout
    listed = subprocess.run(
        [DRIFTLAB, "suite", "--list"],
        cwd=user_project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stderr
    assert "dual-write-race" in listed.stdout


@pytest.mark.slow
def test_the_wheel_installs_only_the_driftlab_name(tmp_path: Path) -> None:
    # Built from a copy: an in-tree build would leave build/ in the repository.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("driftlab", "harness", "checkers", "reports", "scenarios"):
        subprocess.run(["cp", "-r", str(ROOT / name), str(source / name)], check=True)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        (source / name).write_bytes((ROOT / name).read_bytes())
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), source],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("driftlab-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {name.split("/")[0] for name in names}
    assert "driftlab" in tops
    assert [t for t in tops if t != "driftlab" and not t.endswith(".dist-info")] == []
    # The report's templates and static files travel as package data.
    assert "driftlab/reports/templates/run.html.j2" in names
    assert "driftlab/reports/static/report.css" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(entry_points).decode()
    assert "driftlab = driftlab.harness.cli:main" in text
    assert "driftlab = driftlab.harness.pytest_plugin" in text


def test_import_driftlab_is_cheap() -> None:
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, driftlab; print(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('pyspark', 'driftlab')))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert loaded.strip() == "['driftlab']"


def test_the_facade_names_what_users_import() -> None:
    from driftlab.harness.lab.setups.base import Setup
    from driftlab.scenarios.pipeline.spec import load

    assert driftlab.Setup is Setup
    assert driftlab.load_pipeline is load
    for name in driftlab.__all__:
        assert getattr(driftlab, name) is not None, name
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = driftlab.no_such_name
