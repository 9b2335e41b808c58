from __future__ import annotations

import json
import py_compile
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox import Sandbox
from sandbox.backends.base import SandboxError
from sandbox.hermetic import purge_bytecode, pytest_command
from sandbox.junit import nodeid
from tests.sandbox.conftest import DEMO_TASK


def hidden_tests_in(box: Sandbox) -> None:
    shutil.copytree(DEMO_TASK / "tests", box.workspace / "tests", dirs_exist_ok=True)


def test_it_reports_each_test_by_node_id_and_agrees_with_pytest(box: Sandbox) -> None:
    meta = json.loads((DEMO_TASK / "metadata.json").read_text())
    hidden_tests_in(box)
    report = box.run_tests()
    assert report.valid, report.inconsistencies
    assert report.exec.exit_code == 1
    for test in meta["fail_to_pass"]:
        assert report.outcome(test) == "failed"
    for test in meta["pass_to_pass"]:
        assert report.outcome(test) == "passed"
    assert report.outcome("tests/test_nope.py::test_missing") == "missing"
    assert all(t.duration_s >= 0 for t in report.tests.values())

    box.apply_patch((DEMO_TASK / "expected_patch").read_text())
    fixed = box.run_tests()
    assert fixed.valid and fixed.exec.exit_code == 0
    assert all(fixed.outcome(t) == "passed" for t in meta["fail_to_pass"] + meta["pass_to_pass"])


def test_node_ids_cover_classes_and_parameters() -> None:
    assert nodeid("tests/test_x.py", "tests.test_x", "test_a[1-2]") == "tests/test_x.py::test_a[1-2]"
    assert nodeid("tests/test_x.py", "tests.test_x.TestC", "test_b") == "tests/test_x.py::TestC::test_b"
    assert nodeid("test_top.py", "test_top", "test_c") == "test_top.py::test_c"
    # Written in one module, collected in another: the id is where it was collected.
    assert nodeid("tests/__init__.py", "tests.test_a.TestA", "test_one") == "tests/test_a.py::TestA::test_one"
    assert nodeid("tests/shared.py", "tests.test_a", "test_f") == "tests/test_a.py::test_f"
    assert nodeid("tests/test_xy.py", "tests.test_x.TestC", "test_b") == "tests/test_x.py::TestC::test_b"
    # A doctest of a text file (--doctest-glob) is keyed by the file itself, as pytest keys it.
    assert nodeid("README.rst", "README.rst", "README.rst") == "README.rst::README.rst"
    assert nodeid("docs/usage.txt", "docs.usage.txt", "usage.txt") == "docs/usage.txt::usage.txt"


def test_a_run_that_lies_about_its_exit_status_is_flagged(box: Sandbox) -> None:
    hidden_tests_in(box)
    (box.workspace / "conftest.py").write_text(
        "def pytest_sessionfinish(session, exitstatus):\n    session.exitstatus = 0\n"
    )
    report = box.run_tests()
    assert report.exec.exit_code == 0
    assert not report.valid
    assert any("exited 0 but the report has" in p for p in report.inconsistencies)


def test_a_missing_report_is_flagged(box: Sandbox) -> None:
    (box.workspace / "conftest.py").write_text("import os\ndef pytest_configure(config):\n    os._exit(0)\n")
    report = box.run_tests()
    assert not report.valid
    assert "no JUnit report was written" in report.inconsistencies


def test_the_report_path_is_outside_the_workspace_and_new_each_run(box: Sandbox) -> None:
    (box.workspace / "tests" / "test_argv.py").write_text(
        "import sys\ndef test_argv():\n    print('ARGV', sys.argv)\n    assert True\n"
    )
    paths = []
    for _ in range(2):
        report = box.run_tests(["-s", "tests/test_argv.py"])
        arg = next(a for a in report.exec.stdout.split() if "--junitxml=" in a)
        paths.append(arg.split("=", 1)[1].strip("',]"))
    assert paths[0] != paths[1]
    assert all(not p.startswith("/workspace") for p in paths)
    assert not list(Path(box.workspace).rglob("report.xml"))


# --- the hermetic run: nothing in the workspace chooses how pytest runs ---------------------------

F2P = "tests/test_parse_config.py::test_empty_input"
SKIP_CALLS = 'def _call(pyfuncitem):\n    return True\n\n\nglobals()["pytest_" + "pyfunc_call"] = _call\n'
FIXED_CONFIG = (
    (DEMO_TASK / "repo_snapshot" / "configkit" / "config.py")
    .read_text()
    .replace('    if lines[0].startswith("\\ufeff"):', '    if lines and lines[0].startswith("\\ufeff"):')
)


def naive_run(box: Sandbox) -> int | None:
    """What a plain `python -m pytest` in the workspace says: each trick below fools it."""
    return box.exec(["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]).exit_code


def unchecked_pyc(source: str, target: Path) -> None:
    scratch = target.parent / "_scratch_source.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch.write_text(source)
    py_compile.compile(
        str(scratch), cfile=str(target), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
    )
    scratch.unlink()


def _pyc_in_cache(w: Path) -> None:
    unchecked_pyc(FIXED_CONFIG, w / "configkit" / "__pycache__" / f"config.{sys.implementation.cache_tag}.pyc")


def _sourceless_pyc(w: Path) -> None:
    (w / "configkit" / "config.py").unlink()
    unchecked_pyc(FIXED_CONFIG, w / "configkit" / "config.pyc")


def _pyc_behind_symlinked_cache(w: Path) -> None:
    unchecked_pyc(FIXED_CONFIG, w / "elsewhere" / f"config.{sys.implementation.cache_tag}.pyc")
    (w / "configkit" / "__pycache__").symlink_to("../elsewhere")


def _pyc_in_unlistable_dir(w: Path) -> None:
    _pyc_in_cache(w)
    (w / "configkit" / "__pycache__").chmod(0o311)  # the interpreter can open a known name in it


def _dist_info_plugin(w: Path) -> None:
    info = w / "configkit_speedups-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: configkit-speedups\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nspeedups = configkit_speedups\n")
    (w / "configkit_speedups.py").write_text(SKIP_CALLS)


def _config_plugin(name: str, text: str) -> Callable[[Path], None]:
    def plant(w: Path) -> None:
        # pyproject.toml's section is read before tox.ini's and setup.cfg's: take it away.
        pyproject = w / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().split("[tool.pytest.ini_options]")[0])
        (w / name).write_text(text)
        (w / "configkit" / "_speedups.py").write_text(SKIP_CALLS)

    return plant


def _runner_shadow(w: Path) -> None:
    (w / "pytest.py").write_text("import sys\nprint('15 passed in 0.01s')\nsys.exit(0)\n")


TRICKS: dict[str, Callable[[Path], None]] = {
    "an unchecked-hash .pyc in __pycache__": _pyc_in_cache,
    "a sourceless .pyc in place of the .py": _sourceless_pyc,
    "a __pycache__ symlinked to a folder of bytecode": _pyc_behind_symlinked_cache,
    "a .pyc in an unlistable __pycache__": _pyc_in_unlistable_dir,
    "a *.dist-info whose pytest11 entry point is a plugin": _dist_info_plugin,
    "a pytest.toml that loads a plugin": _config_plugin(
        "pytest.toml", '[pytest]\naddopts = ["-p", "configkit._speedups"]\n'
    ),
    "a pytest.ini that loads a plugin": _config_plugin("pytest.ini", "[pytest]\naddopts = -p configkit._speedups\n"),
    "setup.cfg that loads a plugin": _config_plugin("setup.cfg", "[tool:pytest]\naddopts = -p configkit._speedups\n"),
    "tox.ini that loads a plugin": _config_plugin("tox.ini", "[pytest]\naddopts = -p configkit._speedups\n"),
    "a pytest.py that replaces the runner": _runner_shadow,
}


@pytest.mark.parametrize("trick", TRICKS, ids=list(TRICKS))
def test_a_workspace_trick_that_fools_a_plain_pytest_run_does_not_fool_the_harness(box: Sandbox, trick: str) -> None:
    hidden_tests_in(box)
    TRICKS[trick](box.workspace)
    assert naive_run(box) == 0, "the trick must be real: a plain run is fooled"
    report = box.run_tests([F2P])
    assert report.outcome(F2P) != "passed", (report.exec.stdout[-2000:], report.inconsistencies)


def test_pyproject_options_are_not_read_either(box: Sandbox) -> None:
    hidden_tests_in(box)
    pyproject = box.workspace / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('testpaths = ["tests"]', "addopts = \"-k 'not empty'\""))
    assert naive_run(box) == 0
    assert box.run_tests([F2P]).outcome(F2P) == "failed"


def test_the_run_leaves_no_bytecode_and_no_cache_in_the_workspace(box: Sandbox) -> None:
    hidden_tests_in(box)
    _pyc_in_cache(box.workspace)
    box.run_tests()
    assert not list(box.workspace.rglob("__pycache__")) and not list(box.workspace.rglob("*.pyc"))
    assert not (box.workspace / ".pytest_cache").exists()


def test_the_bytecode_purge_removes_links_without_following_them(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.pyc").write_bytes(b"x")
    workspace = tmp_path / "workspace"
    (workspace / "pkg" / "__pycache__").mkdir(parents=True)
    (workspace / "pkg" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"x")
    (workspace / "pkg" / "__pycache__" / "nested").mkdir()
    (workspace / "linked").symlink_to(outside)
    (workspace / "pkg" / "m.pyc").symlink_to(outside / "keep.pyc")
    (workspace / "pkg" / "m.py").write_text("x = 1\n")
    assert purge_bytecode(workspace) == 2
    assert (outside / "keep.pyc").exists() and (workspace / "linked").is_symlink()
    assert sorted(p.name for p in (workspace / "pkg").iterdir()) == ["m.py"]


def test_conftest_fixtures_still_reach_the_tests(box: Sandbox) -> None:
    hidden_tests_in(box)
    (box.workspace / "tests" / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef answer():\n    return 42\n"
    )
    (box.workspace / "tests" / "test_fixture.py").write_text("def test_uses(answer):\n    assert answer == 42\n")
    report = box.run_tests(["tests/test_fixture.py"])
    assert report.valid and report.outcome("tests/test_fixture.py::test_uses") == "passed"


@pytest.mark.parametrize("command", ["pytest -q", "py.test", "python3 -m pytest -q", "python -X dev -m pytest"])
def test_each_accepted_form_of_test_command_runs_the_harness(box: Sandbox, command: str) -> None:
    hidden_tests_in(box)
    report = box.run_tests(["tests/test_values.py"], command=command)
    assert report.valid and len(report.tests) == 5, (report.inconsistencies, report.exec.stderr[-2000:])


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("python -m pytest -q", ["python", "-P", "-s", "-m", "pytest", "-q"]),
        ("pytest -rA tests/unit", ["python", "-P", "-s", "-m", "pytest", "-rA", "tests/unit"]),
        (
            "python3.11 -X dev -W error -m pytest",
            ["python3.11", "-P", "-s", "-X", "dev", "-W", "error", "-m", "pytest"],
        ),
        ("/usr/bin/python3 -bb -m pytest -x", ["/usr/bin/python3", "-P", "-s", "-bb", "-m", "pytest", "-x"]),
    ],
)
def test_a_pytest_command_becomes_the_hermetic_interpreter_line(command: str, argv: list[str]) -> None:
    assert pytest_command(command) == argv


@pytest.mark.parametrize(
    "command",
    [
        "tox -e py311",
        "python runtests.py",
        "./tests/runtests.py --verbosity 2",
        "FOO=1 pytest",
        "python -c 'import pytest; pytest.main()'",
        "bash -c 'pytest'",
        "python -I -m pytest",
        "python -E -m pytest",
        "python -m unittest",
        "make test",
        "",
        "pytest 'unclosed",
    ],
)
def test_a_command_the_harness_cannot_run_hermetically_is_refused(command: str) -> None:
    with pytest.raises(SandboxError, match="test command"):
        pytest_command(command)
