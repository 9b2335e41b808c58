"""Harness plugins: (module name, source) pairs that run_tests loads with -p from a read-only
directory outside the workspace, whose one JSON result comes back in `report.harness`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import Sandbox
from sandbox.backends.base import SandboxError
from sandbox.names import BackendName
from tests.sandbox.conftest import DEMO_TASK, SMALL, backend_for

# Reports what it saw at the end of the session: which plugins pytest loaded, where it
# lives, whether it can write there, and whether the workspace was on sys.path at import.
PROBE = """
import json, os, sys

_IMPORTED_WITH_WORKSPACE_ON_PATH = any(p in ("", ".", os.getcwd()) for p in sys.path)


def pytest_sessionfinish(session, exitstatus):
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(here, "planted.py"), "w") as fh:
            fh.write("x = 1\\n")
        harness_writable = True
    except OSError:
        harness_writable = False
    names = sorted(
        name for name, plugin in session.config.pluginmanager.list_name_plugin()
        if plugin is not None and not name.startswith("_pytest") and "pytest." not in name
    )
    result = {
        "probe": "real",
        "collected": session.testscollected,
        "harness_dir_in_workspace": here.startswith(os.getcwd()),
        "harness_writable": harness_writable,
        "workspace_on_path_at_import": _IMPORTED_WITH_WORKSPACE_ON_PATH,
        "plugins": names,
        "autoload_off": os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"),
    }
    with open(os.environ["CRUCIBLE_HARNESS_OUT"], "w") as fh:
        json.dump(result, fh)
"""
SHADOW = """
import json, os

def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["CRUCIBLE_HARNESS_OUT"], "w") as fh:
        json.dump({"probe": "shadow from the workspace"}, fh)
"""


@pytest.fixture(params=[BackendName.BWRAP, BackendName.LOCAL, BackendName.DOCKER])
def any_box(repo: Path, request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    with Sandbox(repo, backend_for(request.param, request), limits=SMALL) as box:
        shutil.copytree(DEMO_TASK / "tests", box.workspace / "tests", dirs_exist_ok=True)
        yield box


def test_a_harness_plugin_loads_with_autoload_off_and_its_result_comes_back(any_box: Sandbox) -> None:
    report = any_box.run_tests(["tests/test_values.py"], plugins=[("crucible_probe_1a2b", PROBE)])
    assert report.valid, (report.inconsistencies, report.unsafe, report.exec.stderr[-2000:])
    assert report.harness["probe"] == "real" and report.harness["collected"] == len(report.tests) == 5
    assert report.harness["autoload_off"] == "1"
    assert "crucible_probe_1a2b" in report.harness["plugins"]
    assert not report.harness["harness_dir_in_workspace"]
    assert not report.harness["workspace_on_path_at_import"]
    # Plugins pytest would have autoloaded from the runtime (pytest-django, -timeout, ...) are not there.
    assert not {"django", "timeout", "anyio", "faker"} & set(report.harness["plugins"])
    assert not list(any_box.workspace.rglob("crucible_probe_1a2b*"))


def test_the_harness_directory_is_read_only_to_the_run(box: Sandbox) -> None:
    shutil.copytree(DEMO_TASK / "tests", box.workspace / "tests", dirs_exist_ok=True)
    report = box.run_tests(["tests/test_values.py"], plugins=[("crucible_probe_3c4d", PROBE)])
    assert report.harness["harness_writable"] is False


def test_the_workspace_cannot_shadow_a_harness_plugin(box: Sandbox) -> None:
    shutil.copytree(DEMO_TASK / "tests", box.workspace / "tests", dirs_exist_ok=True)
    for where in ("crucible_probe_5e6f.py", "tests/crucible_probe_5e6f.py", "configkit/crucible_probe_5e6f.py"):
        (box.workspace / where).write_text(SHADOW)
    report = box.run_tests(["tests/test_values.py"], plugins=[("crucible_probe_5e6f", PROBE)])
    assert report.harness["probe"] == "real"


def test_without_plugins_no_harness_result_is_read(box: Sandbox) -> None:
    shutil.copytree(DEMO_TASK / "tests", box.workspace / "tests", dirs_exist_ok=True)
    (box.workspace / "tests" / "test_out.py").write_text(
        "import os\n\ndef test_out():\n    assert 'CRUCIBLE_HARNESS_OUT' not in os.environ\n"
    )
    report = box.run_tests(["tests/test_out.py"])
    assert report.outcome("tests/test_out.py::test_out") == "passed" and report.harness == {}


def test_a_result_that_is_not_a_json_object_is_an_inconsistency(box: Sandbox) -> None:
    shutil.copytree(DEMO_TASK / "tests", box.workspace / "tests", dirs_exist_ok=True)
    scribble = (
        "import os\n\ndef pytest_sessionfinish(session):\n"
        "    open(os.environ['CRUCIBLE_HARNESS_OUT'], 'w').write('[1, 2')\n"
    )
    report = box.run_tests(["tests/test_values.py"], plugins=[("crucible_scribble", scribble)])
    assert report.harness == {} and "the harness result is not a JSON object" in report.inconsistencies


def test_a_harness_result_turned_into_a_fifo_is_unsafe_and_does_not_block(box: Sandbox) -> None:
    shutil.copytree(DEMO_TASK / "tests", box.workspace / "tests", dirs_exist_ok=True)
    # Code under test outlives the plugin: at exit it swaps the result for a FIFO.
    (box.workspace / "configkit" / "__init__.py").write_text(
        (box.workspace / "configkit" / "__init__.py").read_text()
        + "\nimport atexit, os\n\ndef _trap():\n    path = os.environ['CRUCIBLE_HARNESS_OUT']\n"
        "    os.unlink(path)\n    os.mkfifo(path)\n\natexit.register(_trap)\n"
    )
    report = box.run_tests(["tests/test_values.py"], plugins=[("crucible_probe_7a8b", PROBE)])
    assert "harness.json is a FIFO" in report.unsafe and report.harness == {} and not report.valid


@pytest.mark.parametrize("name", ["pytest", "_pytest", "conftest", "not-a-module", "a.b", "class", ""])
def test_a_plugin_name_that_is_not_a_free_module_name_is_refused(box: Sandbox, name: str) -> None:
    with pytest.raises(SandboxError, match="plugin name"):
        box.run_tests(plugins=[(name, "")])


def test_plugin_names_may_not_repeat(box: Sandbox) -> None:
    with pytest.raises(SandboxError, match="repeat"):
        box.run_tests(plugins=[("crucible_a", ""), ("crucible_a", "")])


def test_the_harness_result_is_one_json_object_written_by_the_plugin(box: Sandbox) -> None:
    shutil.copytree(DEMO_TASK / "tests", box.workspace / "tests", dirs_exist_ok=True)
    writer = (
        "import json, os\n\ndef pytest_sessionfinish(session):\n"
        "    json.dump({'nested': {'ok': [1, 2]}, 'text': 'ü'}, open(os.environ['CRUCIBLE_HARNESS_OUT'], 'w'))\n"
    )
    report = box.run_tests(["tests/test_values.py"], plugins=[("crucible_writer", writer)])
    assert report.harness == json.loads('{"nested": {"ok": [1, 2]}, "text": "ü"}')
