"""How pytest runs in a repository's environment: the plugins the environment declares load (and
none a workspace plants), the version module a build backend generates is there for every run
(and in no patch), the `pythonpath` setting is carried, and the repository's own copy of a package
pytest itself imports is what its tests import.

Each builds its environment from the package registry once, into the module's private root.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import Sandbox
from sandbox.env_plugins import environment_plugins
from sandbox.environments import EnvBuildError, EnvSpec, ensure_environment
from sandbox.hermetic import own_modules
from tasks.builders.environment import detect_environment
from tests.tasks.test_environments import env_root  # noqa: F401 - the module's private environment root


def write(repo: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    return repo


def spec_of(repo: Path) -> EnvSpec:
    detected = detect_environment(repo)
    assert detected.spec is not None
    assert EnvSpec.from_json(detected.spec.to_json()) == detected.spec
    return detected.spec


def test_plugins_the_environment_declares_load_and_none_the_workspace_plants(
    tmp_path: Path,
    env_root: Path,  # noqa: F811
) -> None:
    # The `mocker` fixture exists only when pytest-mock's pytest11 entry point is loaded.
    repo = write(
        tmp_path / "plugged",
        {
            "pyproject.toml": '[project]\nname = "plugged"\nversion = "1.0"\n\n'
            '[project.optional-dependencies]\ntests = ["pytest-mock"]\n',
            "plugged.py": "def now():\n    return 1\n",
            "tests/test_plugged.py": "import plugged\n\n\ndef test_mocked(mocker):\n"
            "    mocker.patch.object(plugged, 'now', return_value=2)\n    assert plugged.now() == 2\n",
        },
    )
    env = ensure_environment(spec_of(repo))
    assert "pytest_mock" in environment_plugins(env)
    planted = {
        "evil_plugin.py": "raise SystemExit('a planted plugin was loaded')\n",
        "evil-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n",
        "evil-1.0.dist-info/entry_points.txt": "[pytest11]\nevil = evil_plugin\n",
    }
    with Sandbox(repo, "bwrap", environment=env) as box:
        for rel, text in planted.items():
            box.write_file(rel, text)
        report = box.run_tests()
    assert report.passed("tests/test_plugged.py::test_mocked"), report.exec.stdout[-1500:]
    assert "planted plugin" not in report.exec.stdout + report.exec.stderr


def test_the_version_module_the_build_backend_generates_is_there_for_runs_and_in_no_patch(
    tmp_path: Path,
    env_root: Path,  # noqa: F811
) -> None:
    repo = write(
        tmp_path / "versioned",
        {
            "pyproject.toml": '[project]\nname = "versioned"\ndynamic = ["version"]\n\n'
            '[tool.hatch.version]\nsource = "vcs"\nraw-options = { fallback_version = "1.4.0" }\n\n'
            '[tool.hatch.build.hooks.vcs]\nversion-file = "src/versioned/_version.py"\n',
            "src/versioned/__init__.py": "from ._version import __version__, version_tuple\n",
            "tests/test_versioned.py": "import versioned\n\n\ndef test_version():\n"
            "    assert versioned.__version__ == '1.4.0' and versioned.version_tuple == (1, 4, 0)\n",
        },
    )
    spec = spec_of(repo)
    assert spec.version_files == (("src/versioned/_version.py", "1.4.0"),)
    with Sandbox(repo, "bwrap", environment=ensure_environment(spec)) as box:
        assert box.run_tests().passed("tests/test_versioned.py::test_version")
        box.write_file("src/versioned/extra.py", "X = 1\n")
        diff = box.diff()
    assert "extra.py" in diff and "_version.py" not in diff
    # A version module the snapshot already has is the repository's: none is generated over it.
    (repo / "src" / "versioned" / "_version.py").write_text("__version__ = '9'\nversion_tuple = (9,)\n")
    assert spec_of(repo).version_files == ()
    for hostile in (["../x.py", "1.0"], ["/etc/x.py", "1.0"], ["x.py", "1.0\nimport os"], ["x.py"]):
        with pytest.raises(EnvBuildError, match="environment.version_files"):
            EnvSpec.from_json({"requirements": [], "version_files": [hostile]})


def test_the_pytest_pythonpath_setting_is_carried_into_the_import_paths(
    tmp_path: Path,
    env_root: Path,  # noqa: F811
) -> None:
    # As semver's: a conftest that imports helpers living in tests/, importlib import mode.
    repo = write(
        tmp_path / "pathed",
        {
            ".pytest.ini": "[pytest]\ntestpaths = tests\npythonpath = src tests\naddopts = --import-mode=importlib\n",
            "src/pathed/__init__.py": "VALUE = 3\n",
            "tests/helpers.py": "def triple(x):\n    return 3 * x\n",
            "tests/conftest.py": "import pytest\nfrom helpers import triple\n\n\n"
            "@pytest.fixture\ndef nine():\n    return triple(3)\n",
            "tests/test_pathed.py": "import pathed\n\n\ndef test_nine(nine):\n    assert nine == 3 * pathed.VALUE\n",
        },
    )
    detected = detect_environment(repo)
    assert detected.spec is not None and detected.spec.pythonpath == ("src", "tests")
    assert not any("pythonpath" in item for item in detected.skipped)
    with Sandbox(repo, "bwrap", environment=ensure_environment(detected.spec)) as box:
        report = box.run_tests()
    assert report.passed("tests/test_pathed.py::test_nine"), report.exec.stdout[-1500:]


def test_the_repositorys_own_copy_of_a_package_pytest_imports_is_the_one_tested(
    tmp_path: Path,
    env_root: Path,  # noqa: F811
) -> None:
    # iniconfig is one of pytest's own requirements: the runner's copy is imported before any test.
    repo = write(
        tmp_path / "iniconfig",
        {
            "pyproject.toml": '[project]\nname = "iniconfig"\nversion = "7.0"\n',
            "src/iniconfig/__init__.py": "OURS = True\n",
            "testing/test_ours.py": "import iniconfig\n\n\ndef test_ours():\n"
            "    assert getattr(iniconfig, 'OURS', False), iniconfig.__file__\n",
        },
    )
    with Sandbox(repo, "bwrap", environment=ensure_environment(spec_of(repo))) as box:
        report = box.run_tests(["testing"])
    assert report.passed("testing/test_ours.py::test_ours"), report.exec.stdout[-1500:]
    flat = tmp_path / "flat"
    (repo / "src" / "iniconfig").rename(write(flat, {"testing/test_ours.py": ""}) / "iniconfig")
    (flat / "testing" / "test_ours.py").write_text((repo / "testing" / "test_ours.py").read_text())
    with Sandbox(flat, "bwrap") as box:  # the bare runner, the workspace itself on the path
        assert box.run_tests(["testing"]).passed("testing/test_ours.py::test_ours")


def test_only_the_bases_own_modules_are_taken_back_never_pytests_or_the_standard_librarys(tmp_path: Path) -> None:
    base = write(
        tmp_path / "base",
        {
            "src/iniconfig/__init__.py": "",
            "src/namespace_only/data.txt": "",
            "tool.py": "",
            "pytest/__init__.py": "",
            "_pytest/__init__.py": "",
            "pluggy/__init__.py": "",
            "json.py": "",
            "conftest.py": "",
            "crucible_workspace_path.py": "",
        },
    )
    (base / "linked").symlink_to(base / "src" / "iniconfig")
    assert own_modules(base, ("src",)) == ["iniconfig", "tool"]
    assert own_modules(base, ("../..",)) == ["tool"]
