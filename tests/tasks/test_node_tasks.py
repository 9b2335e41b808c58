"""A JavaScript task carries the Node its base asks for (metadata "node", sandbox.node_versions): the
history builder chooses it from the parent commit, validation and scoring run with it, the exports name
it (SWE-bench row, Harbor's node image) and an imported row keeps it; a base no Node here satisfies is
skipped, counted by its reason.

The repositories are made here around the lock pinned in tests/sandbox/fixtures/js/runner (vitest
4.1.12); release 22.20.0 and its node_modules are installed once per host (tests/sandbox/test_node_versions.py).
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from rewards.scoring import score_patch
from rewards.spec import load_spec
from sandbox.node_env import NODE, WHEEL_SOURCE
from sandbox.node_versions import NodeChoice
from tasks import exports
from tasks.builders import error_log, lang_history
from tasks.builders.common import BuildError
from tasks.builders.swebench import build_task as build_swebench_task
from tasks.harbor_lang import language_dockerfile
from tasks.models import Task, TaskSuite
from tasks.services import import_task_dirs, task_spec_for
from tasks.spec import TaskSpec
from tasks.taskdir import TaskDirError

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not Path(NODE).exists() or shutil.which("npm") is None, reason="node or npm is not installed"),
]
LOCKED = Path(__file__).resolve().parents[1] / "sandbox" / "fixtures" / "js" / "runner"
TASKS = Path(__file__).resolve().parents[1] / "fixtures" / "lang_tasks"
BUGGY = "export const add = (a, b) => a - b;\n"
FIXED = "export const add = (a, b) => a + b;\n"
TESTS = """import { expect, test } from "vitest";
import { add } from "./math.js";

test("adds", () => { expect(add(2, 3)).toBe(5); });
test("runs on node 22", () => { expect(process.versions.node.startsWith("22.")).toBe(true); });
"""
OLD_TESTS = 'import { test } from "vitest";\n\ntest("loads", () => {});\n'


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, timeout=60)


def _repo(tmp_path: Path, engines: str) -> Path:
    """Two commits: the base (a bug, engines.node as given), then the fix with its tests."""
    repo = tmp_path / "adder"
    (repo / "src").mkdir(parents=True)
    package = json.loads((LOCKED / "package.json").read_text()) | {"engines": {"node": engines}}
    (repo / "package.json").write_text(json.dumps(package, indent=2) + "\n")
    shutil.copy(LOCKED / "package-lock.json", repo / "package-lock.json")
    (repo / "src" / "math.js").write_text(BUGGY)
    (repo / "src" / "math.test.js").write_text(OLD_TESTS)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "Start")
    (repo / "src" / "math.js").write_text(FIXED)
    (repo / "src" / "math.test.js").write_text(TESTS)
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-am", "Fix add of two numbers")
    return repo


def _build(repo: Path, suite: str, *extra: str) -> None:
    call_command("build_tasks", "--from-git", str(repo), "--suite", suite, "--env", "none", "--license", "MIT",
                 *extra, stdout=io.StringIO(), stderr=io.StringIO())  # fmt: skip


def test_a_history_task_records_node_22_validates_and_scores_with_it_and_exports_it(tmp_path: Path) -> None:
    _build(_repo(tmp_path, ">=22"), "node22", "--validate", "--runs", "1", "--jobs", "1")
    report = TaskSuite.objects.get(name="node22").build_report
    assert report["gate"]["passed"] and "node 22.20.0" in report["gate"]["environment"], report["gate"]
    task = Task.objects.get(suite__name="node22")
    assert task.metadata["node"] == {"version": "22.20.0", "source": WHEEL_SOURCE, "asks": "engines.node '>=22'"}
    # Validation ran the hidden file with node 22 both ways: "runs on node 22" passed on the base too.
    assert task.fail_to_pass == ["src/math.test.js::adds"], task.validation_report["reasons"]
    assert task.pass_to_pass == ["src/math.test.js::runs on node 22"]
    spec = task_spec_for(task)
    assert spec.node == NodeChoice("22.20.0", WHEEL_SOURCE, "engines.node '>=22'")
    assert score_patch(spec, task.expected_patch, load_spec()).reward == 1.0

    row = exports.swebench_instance(task)
    assert row["node"] == task.metadata["node"]
    assert "FROM node:22-bookworm-slim" in language_dockerfile(task, spec.base_dir)
    # The row comes back as a task directory whose metadata names the same Node.
    clones = tmp_path / "clones"
    shutil.copytree(tmp_path / "adder", clones / "adder")
    row |= {"repo": "adder"}
    back = build_swebench_task(row, 1, clones, tmp_path / "imported")
    assert json.loads((back / "metadata.json").read_text())["node"] == task.metadata["node"]
    assert TaskSpec.from_task_dir(back).node == spec.node


def test_a_task_without_a_recorded_node_keeps_the_system_node(tmp_path: Path) -> None:
    _build(_repo(tmp_path, ">=16"), "node16", "--skip-gate")
    task = Task.objects.get(suite__name="node16")
    assert task.metadata["node"]["source"] == "system"
    assert "FROM node:20-bookworm-slim" in language_dockerfile(task, task_spec_for(task).base_dir)
    task.metadata.pop("node")
    assert task_spec_for(task).node is None  # built before Node was chosen: the system's runs it


def test_a_base_no_node_here_satisfies_is_skipped_by_its_reason(tmp_path: Path) -> None:
    repo = _repo(tmp_path, ">=30")
    with pytest.raises(CommandError) as refused:
        _build(repo, "node30", "--skip-gate")
    assert f"'{lang_history.NODE_UNAVAILABLE}': 1" in str(refused.value), str(refused.value)
    why = lang_history.refusal(repo, "HEAD~1", "javascript")
    assert why is not None and why.reason == lang_history.NODE_UNAVAILABLE
    assert "engines.node '>=30'" in why.detail and "22.20.0" in why.detail, why.detail


@pytest.mark.parametrize(
    "node",
    [
        {"version": "22.0.0", "source": WHEEL_SOURCE},  # not a known release: pip would never see it
        {"version": "22.20.0; rm -rf /", "source": WHEEL_SOURCE},
        {"version": "22.20.0", "source": "https://evil.example/node.tgz"},
        "22.20.0",
    ],
)
def test_import_refuses_a_recorded_node_outside_the_table(node: object, tmp_path: Path) -> None:
    task = tmp_path / "tasks" / "js_task_1"
    shutil.copytree(TASKS / "js_task_1", task)
    meta = json.loads((task / "metadata.json").read_text()) | {"node": node}
    (task / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(TaskDirError, match="node"):
        import_task_dirs(tmp_path / "tasks", "bad-node", "train")
    assert not Task.objects.filter(suite__name="bad-node").exists()


def test_an_error_log_task_records_the_node_its_repository_asks_for(tmp_path: Path) -> None:
    repo = _repo(tmp_path, ">=22")
    (repo / "src" / "math.js").write_text(BUGGY)
    log = " FAIL  src/math.test.js > adds\nAssertionError: expected -1 to be 5\n"
    built = error_log.build_task(repo, log, tmp_path / "out")
    meta = json.loads((built / "metadata.json").read_text())
    assert meta["fail_to_pass"] == ["src/math.test.js::adds"]
    assert meta["node"] == {"version": "22.20.0", "source": WHEEL_SOURCE, "asks": "engines.node '>=22'"}
    package = json.loads((repo / "package.json").read_text()) | {"engines": {"node": ">=30"}}
    (repo / "package.json").write_text(json.dumps(package))
    with pytest.raises(BuildError, match="no Node here satisfies engines.node '>=30'"):
        error_log.build_task(repo, log, tmp_path / "out2")
