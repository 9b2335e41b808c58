"""The sandbox runs the repository's code, never Crucible's (issue 19).

A repository that ships a package Crucible itself installs (PyYAML here, a `src/` layout
whose conftest appends `src` to sys.path, as many do) must be tested against its own copy;
a package the repository does not ship is not importable at all.
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from sandbox import Sandbox, runner_env
from sandbox.names import BackendName
from sandbox.runner_env import MANIFEST, ensure_runner_env, runner_distributions, site_packages
from tests.sandbox.conftest import SMALL, backend_for

SHADOWING_REPO = {
    "src/yaml/__init__.py": 'def marker():\n    return "the repository\'s own yaml"\n',
    "conftest.py": (
        "import os, sys\n\n"
        "# Appended, not inserted: an installed copy of the package would come first.\n"
        "sys.path.append(os.path.join(os.path.dirname(__file__), 'src'))\n"
    ),
    "tests/test_marker.py": (
        "import yaml\n\n\n"
        "def test_it_imports_the_repositorys_yaml():\n"
        '    assert yaml.marker() == "the repository\'s own yaml"\n'
    ),
}
PROBE = (
    "import importlib.util, json, sys; "
    "print(json.dumps({n: importlib.util.find_spec(n) is not None for n in sys.argv[1:]}))"
)
BACKENDS = (BackendName.BWRAP, BackendName.DOCKER, BackendName.LOCAL)


def make_repo(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_repository_shipping_a_package_crucible_installs_is_tested_against_its_own_code(
    backend: BackendName, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    import yaml  # Crucible's own: the copy the sandbox must not see

    assert not hasattr(yaml, "marker")
    repo = make_repo(tmp_path / "repo", SHADOWING_REPO)
    with Sandbox(repo, backend_for(backend, request), limits=SMALL) as box:
        report = box.run_tests(["tests/test_marker.py"])
    assert report.outcome("tests/test_marker.py::test_it_imports_the_repositorys_yaml") == "passed", report.exec


@pytest.mark.parametrize("backend", BACKENDS)
def test_packages_the_repository_does_not_ship_are_not_importable(
    backend: BackendName, repo: Path, request: pytest.FixtureRequest
) -> None:
    with Sandbox(repo, backend_for(backend, request), limits=SMALL) as box:
        result = box.exec(["python", "-c", PROBE, "django", "yaml", "celery", "sandbox", "pytest", "json"])
    assert result.exit_code == 0, result.stderr
    found = json.loads(result.stdout)
    assert found == {"django": False, "yaml": False, "celery": False, "sandbox": False, "pytest": True, "json": True}


@pytest.mark.parametrize("backend", [BackendName.BWRAP, BackendName.DOCKER])
def test_neither_crucibles_venv_nor_the_interpreters_site_packages_are_visible(
    backend: BackendName, repo: Path, request: pytest.FixtureRequest
) -> None:
    base_python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    crucible_site = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    with Sandbox(repo, backend_for(backend, request), limits=SMALL) as box:
        listing = box.exec(["ls", f"{crucible_site}/site-packages/django"])
        direct = box.exec([base_python, "-c", PROBE, "yaml", "pytest"])
    assert listing.exit_code != 0 and "No such file or directory" in listing.stderr, listing
    # The bare interpreter (not the runner venv) finds nothing beyond its standard library.
    assert direct.exit_code == 0 and json.loads(direct.stdout) == {"yaml": False, "pytest": False}, direct


def test_the_runner_env_is_built_once_per_pins_and_holds_only_pytest_and_its_requirements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRUCIBLE_RUNNER_DIR", str(tmp_path / "runners"))
    ensure_runner_env.cache_clear()
    try:
        env = ensure_runner_env()
        built = (env / MANIFEST).stat().st_mtime_ns
        ensure_runner_env.cache_clear()
        assert ensure_runner_env() == env and (env / MANIFEST).stat().st_mtime_ns == built
    finally:
        ensure_runner_env.cache_clear()
    assert env.parent == tmp_path / "runners" and env.name.startswith("runner-")
    assert [p.name for p in env.parent.iterdir()] == [env.name]  # no staging dir left behind
    names = {d.metadata["Name"].lower() for d in runner_distributions()}
    assert names == {"pytest", "pluggy", "iniconfig", "packaging", "pygments"}
    installed = {p.name.split("-")[0].lower() for p in site_packages(env).glob("*.dist-info")}
    assert installed == names
    assert json.loads((env / MANIFEST).read_text())["distributions"].keys() >= {"pytest"}


class RecordedWithoutBytecode:
    """A distribution as uv records it: it compiles the bytecode after writing the record, so the
    record lists none of it."""

    def __init__(self, dist: Any) -> None:
        self._dist = dist

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dist, name)

    @property
    def files(self) -> list[Any]:
        return [file for file in self._dist.files or [] if file.suffix != ".pyc"]


def test_the_runner_env_has_current_bytecode_for_every_module_whatever_the_installer_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRUCIBLE_RUNNER_DIR", str(tmp_path / "runners"))
    dists = [RecordedWithoutBytecode(dist) for dist in runner_distributions()]
    monkeypatch.setattr(runner_env, "runner_distributions", lambda: dists)
    ensure_runner_env.cache_clear()
    try:
        env = ensure_runner_env()
    finally:
        ensure_runner_env.cache_clear()
    sources = sorted(site_packages(env).rglob("*.py"))
    assert len(sources) > 50
    stale = []
    for source in sources:
        # A read-only sandbox cannot write bytecode: without a current .pyc each run compiles the module.
        cached = Path(importlib.util.cache_from_source(str(source)))
        header = cached.read_bytes()[:16] if cached.is_file() else b""
        stat = source.stat()
        if header[8:16] != struct.pack("<II", int(stat.st_mtime) & 0xFFFFFFFF, stat.st_size & 0xFFFFFFFF):
            stale.append(source.relative_to(site_packages(env)))
    assert stale == []
