"""The layer contract (docs/architecture.md) holds, and a planted upward import breaks it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's packages and its lint config, copied so a test can plant an import."""
    tree = tmp_path_factory.mktemp("arch")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_project_keeps_its_layer_contract() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout[-4000:]


@pytest.mark.parametrize(
    ("module", "planted", "broken"),
    [
        # An upward import at module level.
        ("tasks/queries.py", "from rewards.models import Reward\n", "tasks is not allowed to import rewards"),
        # Hidden inside a function, where cycles used to be "broken".
        (
            "trajectories/services.py",
            "def _late():\n    from annotation import models\n    return models\n",
            "trajectories is not allowed to import annotation",
        ),
        # The lowest layer reaching for the project.
        ("sandbox/core.py", "import core.roles\n", "sandbox is not allowed to import core"),
        # Django in a plain-Python module.
        ("rewards/scoring.py", "import django.db\n", "rewards.scoring is not allowed to import django"),
    ],
)
def test_a_planted_upward_import_breaks_the_contract(tree_copy: Path, module: str, planted: str, broken: str) -> None:
    target = tree_copy / module
    original = target.read_text()
    try:
        target.write_text(original + "\n" + planted)
        result = lint_imports(tree_copy)
    finally:
        target.write_text(original)
    assert result.returncode != 0
    assert broken in result.stdout, result.stdout[-4000:]


MAX_MODULE_LINES = 500


def test_no_module_of_the_apps_is_over_500_lines() -> None:
    # A module past this has stopped being one idea; migrations are generated, demo/ is data.
    long = {
        str(path.relative_to(ROOT)): lines
        for package in [*PACKAGES, "bench"]
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
        and (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
