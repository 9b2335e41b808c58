"""`export tasks --format harbor`: every demo task, run as Harbor would run it, in Crucible's sandbox.

Harbor builds environment/ into an image with the repository at /app, copies solution/ to
/solution and runs solve.sh (its oracle agent), then copies tests/ to /tests and runs test.sh,
which writes /logs/verifier/reward.json. Here the same scripts run under bwrap over the
exported directory, with those paths mapped, and the runner's Python standing in for the image's.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from core.models import AuditEvent
from sandbox import Limits, Sandbox
from sandbox.backends.bwrap import BwrapBackend
from sandbox.environments import EnvSpec
from tasks.harbor import PYTEST_PIN, dockerfile, pytest_ini, requirements
from tasks.harbor_run import run_harbor_task
from tasks.harbor_verifier import node_id, verdict
from tasks.models import Task, TaskEnvironment
from tasks.services import import_task_dirs
from tests.conftest import DEMO, client_for
from tests.tasks.harbor_schema import validate_task_toml

pytestmark = pytest.mark.django_db
DEMO_TASKS = sorted(p.name for p in (DEMO / "tasks").glob("task_*"))
LIMITS = Limits(wall_seconds=120)


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    import_task_dirs(DEMO / "tasks", "demo", "train")
    out = tmp_path / "harbor.tar"
    call_command("export", "tasks", "--format", "harbor", "--suite", "demo", "--out", str(out), verbosity=0)
    with tarfile.open(out) as archive:
        archive.extractall(tmp_path / "out", filter="data")
    return tmp_path / "out" / "tasks-harbor"


def run_as_harbor(task: Path, solve: bool) -> dict[str, float]:
    """solve.sh (when asked) then test.sh over the task's repository, as Harbor's paths expect."""
    run = run_harbor_task(task, solve=solve, base=task / "environment" / "repo", limits=LIMITS)
    assert run.test_exit == 0 and run.solve_exit in (None, 0), run.output
    return run.rewards


def test_every_demo_task_scores_1_with_its_solution_and_0_without(exported: Path, tmp_path: Path) -> None:
    assert sorted(p.name for p in exported.iterdir()) == DEMO_TASKS
    for name in DEMO_TASKS:
        solved = run_as_harbor(exported / name, solve=True)
        assert solved["reward"] == 1.0, (name, solved)
        assert solved["fail_to_pass_passed"] == solved["fail_to_pass_total"] > 0
        unsolved = run_as_harbor(exported / name, solve=False)
        assert unsolved["reward"] == 0.0, (name, unsolved)
        assert unsolved["fail_to_pass_passed"] < unsolved["fail_to_pass_total"]


def test_a_reward_file_left_in_logs_is_not_believed(exported: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "verifier").mkdir(parents=True)
    (logs / "verifier" / "reward.txt").write_text("1.0")
    backend = BwrapBackend()
    task = exported / "task_0001"
    with Sandbox(task / "environment" / "repo", backend, limits=LIMITS) as box:
        backend.run(
            ["bash", "/tests/test.sh"],
            box.workspace,
            LIMITS,
            extra_ro_binds=[(task / "tests", "/tests")],
            extra_rw_binds=[(box.workspace, "/app"), (logs, "/logs")],
        )
    assert not (logs / "verifier" / "reward.txt").exists()
    assert json.loads((logs / "verifier" / "reward.json").read_text())["reward"] == 0.0


def test_task_toml_has_only_harbor_fields_and_carries_provenance(exported: Path) -> None:
    task = Task.objects.get(task_id="task_0001")
    config = validate_task_toml((exported / "task_0001" / "task.toml").read_text())
    assert config.task is not None and config.task.name == "demo/task_0001"
    assert config.verifier.timeout_sec == task.timeout_seconds + 60
    assert config.agent.timeout_sec == task.max_steps * 60
    crucible = config.metadata["crucible"]
    assert crucible["version"] == task.version and crucible["validation"]["status"] == task.validation_status
    assert (exported / "task_0001" / "instruction.md").read_text() == task.statement
    assert "FROM python:3." in (exported / "task_0001" / "environment" / "Dockerfile").read_text()
    for name in DEMO_TASKS:
        validate_task_toml((exported / name / "task.toml").read_text())


def test_the_verdict_needs_every_listed_test_and_a_report() -> None:
    meta = {"fail_to_pass": ["tests/test_a.py::test_x"], "pass_to_pass": ["tests/test_a.py::TestC::test_y"]}
    report = (
        b'<testsuites><testsuite><testcase file="tests/test_a.py" classname="tests.test_a" name="test_x"/>'
        b'<testcase file="tests/test_a.py" classname="tests.test_a.TestC" name="test_y"/></testsuite></testsuites>'
    )
    assert verdict(report, meta)["rewards"]["reward"] == 1.0
    assert (
        verdict(report.replace(b'name="test_y"/>', b'name="test_y"><skipped/></testcase>'), meta)["rewards"]["reward"]
        == 0.0
    )
    assert verdict(None, meta, "no report")["rewards"]["reward"] == 0.0
    assert verdict(b"<!DOCTYPE x [<!ENTITY a 'b'>]>" + report, meta)["rewards"]["reward"] == 0.0
    assert verdict(report, {"fail_to_pass": [], "pass_to_pass": []})["rewards"]["reward"] == 0.0
    assert node_id("tests/test_a.py", "tests.test_a.TestC", "test_y[1]") == "tests/test_a.py::TestC::test_y[1]"


def test_the_api_streams_the_harbor_directories_as_a_tar(researcher: User) -> None:
    import_task_dirs(DEMO / "tasks", "demo", "train")
    response = client_for(researcher).get("/api/v1/exports/tasks/", {"format": "harbor", "suite": "demo"})
    assert response.status_code == 200 and response["Content-Type"] == "application/x-tar"
    content = b"".join(response.streaming_content)  # type: ignore[attr-defined]
    with tarfile.open(fileobj=io.BytesIO(content)) as archive:
        names = set(archive.getnames())
    assert {"tasks-harbor/task_0001/task.toml", "tasks-harbor/task_0001/tests/test.sh"} <= names
    assert AuditEvent.objects.filter(action="export", detail__format="harbor").exists()


def test_the_dockerfile_carries_the_environment_and_the_lock() -> None:
    spec = EnvSpec.from_json(
        {
            "python": "3.12",
            "requirements": ["attrs>=23"],
            "pythonpath": ["src"],
            "variables": {"TZ": "UTC", "PRICE": "$5"},
            "pytest": {"ini": {"xfail_strict": ["true"]}, "args": []},
            "version_files": [["src/pkg/_version.py", "1.2.3"]],
        }
    )
    task = Task(task_id="t1", version="sha256:abc")
    text = dockerfile(task, spec)
    assert "FROM python:3.12-slim" in text and "COPY generated/ /app/" in text
    assert 'ENV PYTHONPATH="/app/src"' in text and 'ENV PRICE="\\$5"' in text and 'ENV TZ="UTC"' in text
    assert requirements(spec) == ["attrs>=23", PYTEST_PIN]
    TaskEnvironment.objects.create(spec_hash=spec.spec_hash(), built=True, lock=["attrs==23.2.0", "pytest==8.3.1"])
    assert requirements(spec) == ["attrs==23.2.0", "pytest==8.3.1"]
    assert "xfail_strict =\n    true" in pytest_ini(spec)
    assert requirements(EnvSpec(requirements=(), python="3.9")) == ["pytest==8.4.2"]


CONFTEST_ATTACK = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""


def test_what_an_agent_leaves_in_the_workspace_does_not_pass_the_tests(exported: Path, tmp_path: Path) -> None:
    """A conftest.py that passes every test, its bytecode, a `pytest` module that writes a passing report."""
    task = tmp_path / "attacked"
    shutil.copytree(exported / "task_0001", task)
    listed = json.loads((task / "tests" / "crucible_task.json").read_text())
    cases = "".join(
        f'<testcase file="{t.split("::")[0]}" classname="{t.split("::")[0][:-3].replace("/", ".")}" '
        f'name="{t.split("::")[1]}"/>'
        for t in listed["fail_to_pass"] + listed["pass_to_pass"]
    )
    fake_pytest = f"open('/logs/verifier/junit.xml', 'w').write('<testsuite>{cases}</testsuite>')\n"
    (task / "solution" / "solve.sh").write_text(
        "set -e\n"
        f"cat > /app/conftest.py <<'PY'\n{CONFTEST_ATTACK}PY\n"
        "cp /app/conftest.py /app/tests/conftest.py\n"
        "mkdir -p /app/pytest\n"
        f"cat > /app/pytest/__main__.py <<'PY'\n{fake_pytest}PY\n"
        "touch /app/pytest/__init__.py\n"
    )
    run = run_harbor_task(task, solve=True, base=task / "environment" / "repo", limits=LIMITS)
    assert run.solve_exit == 0, run.output
    assert run.rewards["reward"] == 0.0 and run.rewards["fail_to_pass_passed"] == 0, run.output
    assert run.rewards["pass_to_pass_passed"] == run.rewards["pass_to_pass_total"]
