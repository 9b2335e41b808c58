"""How strong a task's tests are: the share of wrong versions of its fix (mutants of the lines the
fix adds) that the hidden tests reject, and whether they reject a rewrite of the fix that does the
same (brittle). Real demo tasks, real sandboxed runs."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest

from patches import pysource
from sandbox import Sandbox
from sandbox.backends.local import LocalBackend
from tasks.spec import TaskSpec
from tasks.strength import measure
from tasks.validation import Thresholds, _strength_checks, validate

DEMO = Path(__file__).resolve().parents[2] / "demo" / "tasks"


def _tests(task: TaskSpec) -> list[str]:
    return [*task.fail_to_pass, *task.pass_to_pass]


def test_strong_tests_kill_every_mutant_of_the_fix_and_accept_a_rewrite() -> None:
    task = TaskSpec.from_task_dir(DEMO / "task_0002")
    found = measure(task, _tests(task), "bwrap")
    assert found.mutants >= 2 and found.score == 1.0 and found.survivors == []
    assert found.rewrites >= 1 and found.brittle == []


def test_weak_tests_let_wrong_versions_of_the_fix_through_and_validation_can_refuse_them() -> None:
    # task_0001's tests never feed a byte-order mark, so wrong versions of the BOM check pass them.
    task = TaskSpec.from_task_dir(DEMO / "task_0001")
    found = measure(task, _tests(task), "bwrap")
    assert found.score is not None and found.score < 0.9 and found.survivors
    arguments: dict[str, Any] = {
        "statement": task.statement,
        "expected_patch": task.expected_patch,
        "runs": 1,
        "license_allowlist": ["MIT"],
        "declared_license": "MIT",
        "backend": "bwrap",
    }
    refused = validate(task, **arguments, thresholds=Thresholds(min_test_strength=0.9))
    reasons = [c.reason for c in refused.checks if not c.ok]
    assert refused.status == "invalid" and any("test strength" in r and "wrong versions" in r for r in reasons)
    assert refused.test_strength["score"] == found.score and refused.test_strength["survivors"] == found.survivors
    # Measured without a minimum, the same strength is reported and blocks nothing.
    reported = {c.name: c for c in _strength_checks(found, 0.0)}
    assert reported["test_strength"].ok and not reported["test_strength"].hard and reported["not_brittle"].ok


def test_tests_that_check_the_fixs_spelling_are_brittle(tmp_path: Path) -> None:
    task_dir = tmp_path / "task_0002"
    shutil.copytree(DEMO / "task_0002", task_dir)
    task = TaskSpec.from_task_dir(task_dir)
    with Sandbox(task.base_dir, LocalBackend(allow_unsafe=True)) as box:
        box.apply_patch(task.expected_patch)
        fixed = (box.workspace / "configkit" / "config.py").read_text()
    # What inspect.getsource gives for the fixed parse_config: its lines, from `def` to its end.
    node = next(n for n in pysource.parse(fixed).body if getattr(n, "name", "") == "parse_config")
    source = "".join(fixed.splitlines(keepends=True)[node.lineno - 1 : node.end_lineno])
    digest = hashlib.sha256(source.encode()).hexdigest()
    (task_dir / "tests" / "test_spelling.py").write_text(
        "import hashlib\nimport inspect\n\nfrom configkit.config import parse_config\n\n\n"
        f"def test_the_parser_is_written_as_it_was():\n"
        f"    assert hashlib.sha256(inspect.getsource(parse_config).encode()).hexdigest() == {digest!r}\n"
    )
    task = dataclasses.replace(
        TaskSpec.from_task_dir(task_dir),
        pass_to_pass=(*task.pass_to_pass, "tests/test_spelling.py::test_the_parser_is_written_as_it_was"),
    )
    found = measure(task, _tests(task), "bwrap", max_mutants=1)
    assert found.rewrites == 1 and len(found.brittle) == 1 and "renamed" in found.brittle[0]


@pytest.mark.parametrize("minimum", [-0.1, 1.5])
def test_a_threshold_outside_zero_to_one_is_refused(minimum: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        Thresholds(min_test_strength=minimum)


@pytest.mark.django_db
def test_the_task_and_suite_pages_show_test_strength(researcher: object) -> None:
    from tasks.models import Task
    from tasks.services import import_task_dirs, validate_task
    from tests.conftest import client_for

    import_task_dirs(DEMO / "task_0001", "strength")
    task = Task.objects.get(task_id="task_0001")
    validate_task(task, runs=1, backend="bwrap", thresholds=Thresholds(min_test_strength=0.0))
    task.refresh_from_db()
    measured = task.validation_report["test_strength"]
    assert measured["mutants"] > 0 and measured["score"] < 1
    client = client_for(researcher)  # type: ignore[arg-type]
    page = client.get("/tasks/strength/task_0001/").content.decode()
    assert 'id="test-strength"' in page and f"{measured['killed']} of {measured['mutants']} wrong versions" in page
    suite = client.get("/tasks/strength/").content.decode()
    assert 'id="suite-test-strength"' in suite and "Test strength" in suite
