"""Per-repository environments: a `src/` layout with a runtime dependency from the registry becomes valid
tasks through a built environment, on bwrap and on docker; a second build reuses it; hostile specs are refused.

The dependency (`six`) is installed from the package registry once per test session, into a private
environment root; nothing of Crucible's own venv is visible in the sandbox, so without the environment
the same task cannot even import its package.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from sandbox import Sandbox
from sandbox.backends.docker import DockerBackend
from sandbox.environments import ROOT_ENV, EnvBuildError, EnvSpec, ensure_environment, pip_install_argv
from tasks.builders.environment import LAST_PYTEST_WITH_PY_PATH, detect_environment, runner_pytest
from tasks.models import Task, TaskEnvironment, TaskSuite
from tasks.services import import_task_dirs, task_spec_for, validation_inputs
from tasks.spec import run_task_tests
from tasks.taskdir import TaskDirError
from tasks.validation import validate
from tests.conftest import client_for
from tests.sandbox.conftest import docker_backend  # noqa: F401 - the session's podman service
from tests.tasks.test_builders_history import commit

CALC = 'import six\n\n\ndef describe(value):\n    """A value as text."""\n    return six.text_type(value) + "!"\n'
FIXED = 'import six\n\n\ndef describe(value):\n    """A value as text."""\n    return six.text_type(value)\n'
TEST_OLD = "from calc import describe\n\n\ndef test_describe_int():\n    assert describe(1).startswith('1')\n"
TEST_NEW = (
    TEST_OLD + "\n\ndef test_describe_has_no_bang():\n    assert describe(2) == '2', 'describe(2) should be plain'\n"
)
PYPROJECT = '[project]\nname = "calc"\nversion = "0.1"\nrequires-python = ">=3.8"\ndependencies = ["six>=1.16"]\n'


@pytest.fixture(scope="module")
def env_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private environment root for the module: the first build installs, later ones reuse."""
    root = tmp_path_factory.mktemp("envs")
    before = os.environ.get(ROOT_ENV)
    os.environ[ROOT_ENV] = str(root)
    yield root
    if before is None:
        os.environ.pop(ROOT_ENV, None)
    else:
        os.environ[ROOT_ENV] = before


@pytest.fixture
def src_repo(tmp_path: Path, env_root: Path) -> Path:
    repo = tmp_path / "calc"
    commit(
        repo,
        "Start",
        {
            "LICENSE": "Permission is hereby granted, free of charge\n",
            "pyproject.toml": PYPROJECT,
            "src/calc/__init__.py": CALC,
            "tests/test_calc.py": TEST_OLD,
        },
    )
    commit(
        repo,
        "describe() adds a stray exclamation mark\n\ndescribe(2) gives '2!' where '2' is expected.",
        {"src/calc/__init__.py": FIXED, "tests/test_calc.py": TEST_NEW},
    )
    return repo


def test_detects_dependencies_test_runner_and_src_layout(src_repo: Path) -> None:
    detected = detect_environment(src_repo)
    assert detected.spec is not None
    assert detected.spec.pythonpath == ("src",)
    assert "six>=1.16" in detected.spec.requirements
    assert runner_pytest() in detected.spec.requirements
    assert "pyproject.toml" in detected.sources


@pytest.mark.django_db(transaction=True)
def test_src_layout_with_a_dependency_becomes_a_valid_task_through_its_environment(
    src_repo: Path,
    env_root: Path,
    docker_backend: DockerBackend,  # noqa: F811
    researcher: User,
) -> None:
    out = io.StringIO()
    call_command("build_tasks", "--from-git", str(src_repo), "--suite", "envs", "--validate", "--runs", "1", stdout=out)
    task = Task.objects.get(suite__name="envs")
    assert task.validation_status == "valid", task.validation_report
    assert task.fail_to_pass == ["tests/test_calc.py::test_describe_has_no_bang"]
    env_meta = task.metadata["environment"]
    assert env_meta["pythonpath"] == ["src"] and "six>=1.16" in env_meta["requirements"]
    record = TaskEnvironment.objects.get()
    assert record.built and record.size_bytes > 0 and any(p.startswith("six==") for p in record.lock)
    report = task.suite.build_report
    # The repository gate built it, running the suite once at the newest commit; the tasks reuse it.
    assert report["gate"]["passed"] and report["gate"]["environment"] in report["environments"][0]
    assert "reused from the cache" in report["environments"][0]

    # The same task through the docker backend: the environment is baked into an image.
    spec = task_spec_for(task)
    patched = run_task_tests(spec, task.expected_patch, docker_backend)
    assert patched.outcome("tests/test_calc.py::test_describe_has_no_bang") == "passed", patched.exec.stderr[-800:]
    base = run_task_tests(spec, None, docker_backend)
    assert base.outcome("tests/test_calc.py::test_describe_has_no_bang") == "failed"
    assert base.outcome("tests/test_calc.py::test_describe_int") == "passed"
    inputs, arguments = validation_inputs(task, 1)
    result = validate(inputs, **arguments | {"backend": docker_backend})
    assert result.status == "valid", result.to_json()["reasons"]

    # The suite page shows the environment, its size and its build log.
    page = client_for(researcher).get(f"/tasks/{task.suite.name}/").content.decode()
    assert record.key in page and "Build log" in page

    # Without the environment the package is not importable: the runner alone has neither six nor src/.
    bare = run_task_tests(spec.__class__(**{**spec.__dict__, "environment": None}), task.expected_patch)
    assert bare.outcome("tests/test_calc.py::test_describe_has_no_bang") != "passed"

    # A second build finds the environment by its spec and installs nothing.
    started = time.monotonic()
    again = io.StringIO()
    call_command("build_env", "--repo", str(src_repo), stdout=again, stderr=io.StringIO())
    assert "reused from the cache" in again.getvalue() and record.key in again.getvalue()
    assert time.monotonic() - started < 2.0
    assert len([p for p in env_root.iterdir() if p.is_dir() and not p.name.startswith(".")]) == 2  # env + specs/


def test_environment_is_read_only_and_shared_by_spec(env_root: Path) -> None:
    spec = EnvSpec(requirements=("six>=1.16", runner_pytest()), pythonpath=("src",))
    first = ensure_environment(spec)
    second = ensure_environment(EnvSpec(requirements=(runner_pytest(), "six>=1.16"), pythonpath=("src",)))
    assert first.key == second.key and not second.built_now
    # Another repository with the same dependencies and no src/ layout shares the venv, not the import paths.
    flat = ensure_environment(EnvSpec(requirements=("six>=1.16", runner_pytest())))
    assert flat.key == first.key and flat.spec.pythonpath == () and first.spec.pythonpath == ("src",)
    six_file = next(first.path.glob("lib/python*/site-packages/six.py"))
    assert not os.access(six_file, os.W_OK) or os.geteuid() == 0
    assert six_file.stat().st_mode & 0o222 == 0


@pytest.mark.django_db
def test_build_env_says_when_an_environment_cannot_be_built(tmp_path: Path, env_root: Path) -> None:
    repo = tmp_path / "broken"
    commit(
        repo,
        "Start",
        {
            "pyproject.toml": PYPROJECT.replace("six>=1.16", "crucible-no-such-package-anywhere==9.9.9"),
            "src/calc/__init__.py": FIXED.replace("import six", "import six  # noqa"),
            "tests/test_calc.py": TEST_OLD,
        },
    )
    commit(repo, "Fix describe", {"src/calc/__init__.py": FIXED + "\n", "tests/test_calc.py": TEST_NEW})
    with pytest.raises(CommandError, match="cannot be built: pip exited 1: .*crucible-no-such-package-anywhere"):
        call_command("build_env", "--repo", str(repo), stdout=io.StringIO(), stderr=io.StringIO())
    assert TaskEnvironment.objects.get().error.startswith("pip exited 1")


@pytest.mark.django_db(transaction=True)
def test_validation_says_environment_cannot_be_built(tmp_path: Path, env_root: Path) -> None:
    repo = tmp_path / "broken"
    commit(
        repo,
        "Start",
        {
            "pyproject.toml": PYPROJECT.replace("six>=1.16", "crucible-no-such-package-anywhere==9.9.9"),
            "src/calc/__init__.py": CALC,
            "tests/test_calc.py": TEST_OLD,
        },
    )
    commit(repo, "Fix describe", {"src/calc/__init__.py": FIXED, "tests/test_calc.py": TEST_NEW})
    build = ["build_tasks", "--from-git", str(repo), "--suite", "broken", "--validate", "--runs", "1"]
    # The repository gate says it once, for the repository, and builds nothing.
    with pytest.raises(CommandError) as refused:
        call_command(*build, stdout=io.StringIO(), stderr=io.StringIO())
    assert "the repository gate failed; no task was built" in str(refused.value)
    assert "the environment cannot be built" in str(refused.value) and "crucible-no-such-package" in str(refused.value)
    assert not Task.objects.filter(suite__name="broken").exists()
    assert TaskSuite.objects.get(name="broken").build_report["gate"]["passed"] is False
    # Built anyway, each task says why it cannot be valid.
    call_command(*build, "--skip-gate", stdout=io.StringIO(), stderr=io.StringIO())
    task = Task.objects.get(suite__name="broken")
    assert task.validation_status == "invalid"
    reasons = task.validation_report["reasons"] if "reasons" in task.validation_report else []
    text = json.dumps(task.validation_report)
    assert "the environment cannot be built" in text, reasons
    assert "no test fails before the fix" not in text
    assert any("cannot be built" in line for line in task.suite.build_report["environments"])
    assert not TaskEnvironment.objects.get().built


def test_python_the_host_lacks_is_refused_before_any_install(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "old"\nrequires-python = "<3.0"\n')
    with pytest.raises(EnvBuildError, match="requires Python <3.0"):
        detect_environment(tmp_path)


def test_setup_py_is_read_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "setup.py").write_text(
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('x')\n"
        "deps = ['attrs>=20']\n"
        "setup(name='x', install_requires=deps, extras_require={'test': ['hypothesis'], 'docs': ['sphinx']})\n"
    )
    (tmp_path / "requirements-test.txt").write_text(
        "# tools\n-r requirements.txt\n--index-url http://evil.example/simple\nmock>=4  # comment\n"
        "git+https://example.com/x.git\n./local-dir\n"
    )
    detected = detect_environment(tmp_path)
    assert not marker.exists()
    assert detected.spec is not None
    assert {"attrs>=20", "hypothesis", "mock>=4"} <= set(detected.spec.requirements)
    assert not any("sphinx" in r or "evil" in r or "git+" in r for r in detected.spec.requirements)
    assert any("evil.example" in s for s in detected.skipped) and any("git+" in s for s in detected.skipped)


def test_setup_cfg_test_extras_and_pinned_runner(tmp_path: Path) -> None:
    (tmp_path / "setup.cfg").write_text(
        "[options]\ninstall_requires =\n    idna>=2\n\n"
        "[options.extras_require]\ntesting =\n    pytest>=7,<8\n    flake8\n"
    )
    detected = detect_environment(tmp_path)
    assert detected.spec is not None
    assert set(detected.spec.requirements) == {"idna>=2", "pytest<8,>=7"}


def test_a_runner_split_by_python_marker_takes_the_alternative_for_this_python(tmp_path: Path) -> None:
    # A PEP 735 group as real projects write it: one pytest per Python, and a shared group included.
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "split"\n\n[dependency-groups]\n'
        'base = ["iniconfig>=1", "tomli; python_version < \'3.11\'"]\n'
        "test = [\n  \"pytest>=7,<8; python_version < '3.8'\",\n  \"pytest>=8; python_version >= '3.8'\",\n"
        '  {include-group = "base"},\n]\n'
    )
    detected = detect_environment(tmp_path)
    assert detected.spec is not None
    assert detected.runner == 'pytest>=8; python_version >= "3.8"'
    assert "iniconfig>=1" in detected.spec.requirements
    assert not any(r.startswith("tomli") for r in detected.spec.requirements)  # for Pythons before 3.11 only
    assert any("not for Python" in s and "pytest>=7,<8" in s for s in detected.skipped)


def test_a_dependency_group_that_includes_itself_is_reported_not_followed_forever(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "loop"\n\n[dependency-groups]\n'
        'test = ["attrs", {include-group = "more"}]\nmore = [{include-group = "test"}]\n'
    )
    detected = detect_environment(tmp_path)
    assert detected.spec is not None and "attrs" in detected.spec.requirements
    assert any("includes itself (test -> more -> test)" in s for s in detected.skipped)


def test_conftest_with_py_path_hooks_gets_a_pytest_that_accepts_them(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("def pytest_ignore_collect(path, config):\n    return False\n")
    detected = detect_environment(tmp_path)
    assert detected.spec is not None and LAST_PYTEST_WITH_PY_PATH in detected.spec.requirements
    shutil.rmtree(tmp_path)
    tmp_path.mkdir()
    assert detect_environment(tmp_path).spec is None  # nothing to install: the bare runner


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("requirements", ["six @ https://evil.example/six.whl"], "never a URL"),
        ("requirements", ["--index-url=http://evil.example/simple"], "pip options"),
        ("requirements", ["six\n--extra-index-url http://evil.example"], "pip options"),
        ("requirements", ["-e ."], "pip options"),
        ("requirements", ["../../etc/passwd"], "requirement"),
        ("pythonpath", ["../../.."], "relative path inside"),
        ("pythonpath", ["/usr/lib/python3/dist-packages"], "relative path inside"),
        ("pythonpath", ["src:/etc"], "relative path inside"),
        ("python", "2.7", "expected a version"),
        ("python", "3.9", "no other interpreter"),
    ],
)
def test_hostile_environment_in_metadata_is_refused_at_import(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    task = tmp_path / "hostile"
    shutil.copytree(Path(__file__).resolve().parents[2] / "demo" / "tasks" / "task_0001", task)
    meta = json.loads((task / "metadata.json").read_text())
    meta["environment"] = {"python": "3.11", "requirements": ["six"], "pythonpath": []} | {field: value}
    (task / "metadata.json").write_text(json.dumps(meta))
    if value == "3.9":
        # A version this host lacks is not malformed: the import takes it, the build refuses it.
        spec = EnvSpec.from_json(meta["environment"])
        with pytest.raises(EnvBuildError, match=message):
            ensure_environment(spec)
        return
    with pytest.raises(TaskDirError, match=message):
        import_task_dirs(task, "hostile")


def test_only_wheels_unless_an_administrator_allows_source_builds(tmp_path: Path) -> None:
    argv = pip_install_argv("/env/bin/python", tmp_path / "r.txt", tmp_path / "r.json", allow_sdist=False)
    assert "--only-binary=:all:" in argv
    assert "--only-binary=:all:" not in pip_install_argv("/p", tmp_path / "r", tmp_path / "j", allow_sdist=True)


def test_set_up_variables_reach_the_tests_and_reserved_names_are_refused(tmp_path: Path, env_root: Path) -> None:
    repo = tmp_path / "tz"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_tz.py").write_text(
        "import os\n\n\ndef test_zone():\n    assert os.environ.get('APP_MODE') == 'testing'\n"
    )
    detected = detect_environment(repo, variables=[("APP_MODE", "testing")])
    assert detected.spec is not None and detected.spec.variables == (("APP_MODE", "testing"),)
    env = ensure_environment(detected.spec)
    with Sandbox(repo, "bwrap", environment=env) as box:
        assert box.run_tests().outcome("tests/test_tz.py::test_zone") == "passed"
    with Sandbox(repo, "bwrap") as box:
        assert box.run_tests().outcome("tests/test_tz.py::test_zone") == "failed"
    for name in ("PATH", "PYTHONPATH", "PYTEST_ADDOPTS", "LD_PRELOAD", "CRUCIBLE_HARNESS_OUT", "lower", "A-B"):
        with pytest.raises(EnvBuildError, match="is not a NAME the task may set"):
            EnvSpec.from_json({"requirements": [], "variables": {name: "x"}})
    with pytest.raises(EnvBuildError, match="printable"):
        EnvSpec.from_json({"requirements": [], "variables": {"MODE": "a\nb"}})
    with pytest.raises(CommandError, match="expected NAME=VALUE"):
        call_command("build_env", "--repo", str(repo), "--test-env", "novalue", stdout=io.StringIO())


def test_the_repositorys_pytest_settings_are_carried_into_the_harness_not_read_from_the_workspace(
    tmp_path: Path, env_root: Path
) -> None:
    # A suite whose fixture folder holds files that look like tests but must not be collected, and
    # whose own test files are named check_*.py: without its settings, collection fails.
    repo = tmp_path / "settings"
    files = {
        "setup.cfg": (
            "[tool:pytest]\nnorecursedirs = fixtures .git\npython_files = check_*.py test_*.py\n"
            "addopts = --strict-markers -p no_such_plugin --ignore=tests/data -x\nlog_cli = true\n"
            "markers =\n    slow: a slow test\n"
        ),
        "tests/check_core.py": "import pytest\n\n\n@pytest.mark.slow\ndef test_core():\n    assert True\n",
        "tests/fixtures/test_sample.py": "import not_installed_anywhere\n",
        "tests/data/test_more.py": "raise SystemExit('collected')\n",
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    detected = detect_environment(repo)
    assert detected.spec is not None
    carried = detected.spec.pytest
    assert dict(carried.ini)["norecursedirs"] == ("fixtures", ".git")
    assert carried.args == ("--strict-markers", "--ignore=tests/data")
    assert any("'-p'" in s for s in detected.skipped) and any("log_cli" in s for s in detected.skipped)
    assert EnvSpec.from_json(detected.spec.to_json()) == detected.spec
    env = ensure_environment(detected.spec)
    with Sandbox(repo, "bwrap", environment=env) as box:
        report = box.run_tests()
        assert report.valid and sorted(report.tests) == ["tests/check_core.py::test_core"], report.tests
        # The workspace's own config is still never read: an agent's edit of it changes nothing.
        box.write_file("setup.cfg", "[tool:pytest]\nnorecursedirs = nothing\naddopts = -p no_such_plugin\n")
        assert sorted(box.run_tests().tests) == ["tests/check_core.py::test_core"]
    with Sandbox(repo, "bwrap") as box:
        bare = box.run_tests()  # the same suite without the carried settings: broken, its test unseen
        assert bare.exec.exit_code != 0 and "tests/check_core.py::test_core" not in bare.tests


@pytest.mark.parametrize(
    "pytest_settings",
    [
        {"ini": {"norecursedirs": ["fixtures\naddopts = -p evil"]}, "args": []},
        {"ini": {"testpaths": ["../outside"]}, "args": []},
        {"ini": {"addopts": ["-p evil"]}, "args": []},
        {"ini": {}, "args": ["-p", "evil"]},
        {"ini": {}, "args": ["--ignore=/etc"]},
        {"ini": {}, "args": ["--import-mode=evil"]},
        {"ini": {"xfail_strict": ["maybe"]}, "args": []},
        {"ini": {"python_files": ["x" * 400]}, "args": []},
        {"rules": {}},
    ],
)
def test_hostile_pytest_settings_in_metadata_are_refused(pytest_settings: dict[str, object]) -> None:
    with pytest.raises(EnvBuildError, match="environment.pytest"):
        EnvSpec.from_json({"requirements": [], "pytest": pytest_settings})


def test_a_package_that_reads_its_own_metadata_finds_it_without_being_installed(tmp_path: Path, env_root: Path) -> None:
    # Many packages set __version__ from importlib.metadata at import: not installed, they do not import.
    repo = tmp_path / "meta"
    files = {
        "pyproject.toml": '[project]\nname = "meta-pkg"\ndynamic = ["version"]\n\n'
        '[project.scripts]\nmeta = "meta_pkg.cli:main"\n\n'
        '[project.entry-points."meta.plugins"]\nbasic = "meta_pkg:Basic"\n',
        "src/meta_pkg/__init__.py": 'from importlib.metadata import version\n\n__version__ = "2.5.1"\n'
        'VERSION = version("meta-pkg")\n\n\nclass Basic:\n    pass\n',
        "tests/test_meta.py": "from importlib.metadata import entry_points, version\n\nimport meta_pkg\n\n\n"
        "def test_version():\n    assert meta_pkg.VERSION == version('meta_pkg') == '2.5.1'\n\n\n"
        "def test_plugins():\n    assert [e.value for e in entry_points(group='meta.plugins')] == ['meta_pkg:Basic']\n",
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    detected = detect_environment(repo)
    assert detected.spec is not None and detected.spec.project is not None
    assert (detected.spec.project.name, detected.spec.project.version) == ("meta-pkg", "2.5.1")
    assert EnvSpec.from_json(detected.spec.to_json()) == detected.spec
    with Sandbox(repo, "bwrap", environment=ensure_environment(detected.spec)) as box:
        report = box.run_tests()
    assert report.passed("tests/test_meta.py::test_version") and report.passed("tests/test_meta.py::test_plugins")
    # A repository whose code never reads metadata gets no project metadata, and no environment for it.
    (repo / "src" / "meta_pkg" / "__init__.py").write_text('__version__ = "2.5.1"\n')
    assert detect_environment(repo).spec is None or detect_environment(repo).spec.project is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "project",
    [
        {"name": "x\nVersion: 9", "version": "1.0"},
        {"name": "ok", "version": "1.0\nName: other"},
        {"name": "ok", "version": "not a version"},
        {"name": "ok", "version": "1.0", "entry_points": [["console_scripts", "x", "os:system\n[evil]"]]},
        {"name": "ok", "version": "1.0", "entry_points": [["g]\n[h", "x", "a:b"]]},
        {"name": "../escape", "version": "1.0"},
    ],
)
def test_hostile_project_metadata_is_refused(project: dict[str, object]) -> None:
    with pytest.raises(EnvBuildError, match="environment.project"):
        EnvSpec.from_json({"requirements": [], "project": project})


@pytest.mark.django_db(transaction=True)
def test_a_suite_built_without_what_its_tests_need_is_repaired_in_place(tmp_path: Path, env_root: Path) -> None:
    repo = tmp_path / "mode"
    needs = "import os\n\nfrom calc import add\n\n\ndef test_add():\n    assert os.environ['APP_MODE'] == 'testing'\n"
    buggy, fixed = "def add(a, b):\n    return a - b\n", "def add(a, b):\n    return a + b\n"
    commit(repo, "Start", {"LICENSE": "Permission is hereby granted, free of charge\n", "calc.py": buggy,
                           "tests/test_add.py": needs + "    assert add(1, 0) == 1\n"})  # fmt: skip
    commit(repo, "Fix add", {"calc.py": fixed, "tests/test_add.py": needs + "    assert add(1, 1) == 2\n"})
    quiet = {"stdout": io.StringIO(), "stderr": io.StringIO()}
    call_command("build_tasks", "--from-git", str(repo), "--suite", "mode", "--skip-gate", "--validate", "--runs", "1",
                 **quiet)  # fmt: skip
    task = Task.objects.get(suite__name="mode")
    assert task.validation_status == "invalid" and "environment" not in task.metadata
    before = task.version
    out = io.StringIO()
    call_command("build_env", "--suite", "mode", "--test-env", "APP_MODE=testing", "--validate", "--runs", "1",
                 stdout=out, stderr=io.StringIO())  # fmt: skip
    task.refresh_from_db()
    assert "1 task(s) given a new environment" in out.getvalue() and "validated again: 1 valid" in out.getvalue()
    assert task.validation_status == "valid", task.validation_report.get("reasons")
    assert task.metadata["environment"]["variables"] == {"APP_MODE": "testing"}
    assert task.version != before
    again = io.StringIO()
    call_command("build_env", "--suite", "mode", "--test-env", "APP_MODE=testing", stdout=again, stderr=io.StringIO())
    assert "0 task(s) given a new environment, 1 unchanged" in again.getvalue()
    with pytest.raises(CommandError, match="no suite 'nope'"):
        call_command("build_env", "--suite", "nope", stdout=io.StringIO())


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pyproject.toml", '[tool.pytest]\ntestpaths = ["tests"]\naddopts = ["--import-mode=importlib"]\n'),
        ("pytest.toml", '[pytest]\ntestpaths = ["tests"]\naddopts = ["--import-mode=importlib"]\n'),
    ],
)
def test_pytest_9s_native_toml_settings_are_read_before_older_files(tmp_path: Path, name: str, text: str) -> None:
    from sandbox.pytest_settings import read_settings

    (tmp_path / name).write_text(text)
    (tmp_path / "tox.ini").write_text("[pytest]\naddopts = --doctest-modules\n")  # lower in pytest's order
    settings, _, found = read_settings(tmp_path)
    assert found == name and dict(settings.ini)["testpaths"] == ("tests",)
    assert settings.args == ("--import-mode=importlib",)
