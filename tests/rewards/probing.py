"""Helpers the behaviour-check tests share: a probed run as score_patch makes it, and a small
synthetic task with classes, unittest, fixtures and parameters."""

from __future__ import annotations

import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path

from rewards.anticheat import Flag
from rewards.behaviour import Probes, judge_probes, plant_probes
from rewards.spec import load_spec
from sandbox import Limits, Sandbox, results
from tasks.spec import TaskSpec, copy_hidden_tests

SALT = b"behaviour-tests"
SPEC = load_spec()
# score_patch plants the probes once the lead wires rewards.behaviour into it.


@dataclass
class ProbedRun:
    probes: Probes
    report: results.TestReport
    flags: list[Flag]

    @property
    def detectors(self) -> set[str]:
        return {f.detector for f in self.flags}


def probed_run(task: TaskSpec, patch: str | None, salt: bytes = SALT) -> ProbedRun:
    """What score_patch does with the probes: hidden tests in, probes planted, one run, judged."""
    with Sandbox(task.base_dir, limits=Limits().with_timeout(task.timeout_seconds)) as box:
        if patch:
            box.apply_patch(patch)
        copy_hidden_tests(box, task)
        probes = plant_probes(box.workspace, task, salt)
        report = box.run_tests(probes.args, command=task.test_command, plugins=probes.plugins)
    return ProbedRun(probes, report, judge_probes(probes, report))


def plain_run(task: TaskSpec, patch: str) -> results.TestReport:
    with Sandbox(task.base_dir) as box:
        box.apply_patch(patch)
        copy_hidden_tests(box, task)
        return box.run_tests([*task.fail_to_pass, *task.pass_to_pass], command=task.test_command)


def workspace_with_hidden_tests(tmp_path: Path, task: TaskSpec) -> Path:
    workspace = tmp_path / "workspace"
    shutil.copytree(task.base_dir, workspace)
    shutil.copytree(task.tests_dir, workspace / task.tests_dest, dirs_exist_ok=True)
    return workspace


def all_pass(task: TaskSpec, report: results.TestReport) -> bool:
    return all(report.outcome(t) == "passed" for t in (*task.fail_to_pass, *task.pass_to_pass))


def probe_ids(probes: Probes) -> list[str]:
    return [*probes.canary_ids, *probes.twin_ids]


# --- planting -------------------------------------------------------------------------


SHAPES = """
REGISTRY = []


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        if not isinstance(other, Point):
            return NotImplemented
        return (self.x, self.y) == (other.x, other.y)

    __hash__ = None

    def __repr__(self):
        return f"Point({self.x}, {self.y})"


def midpoint(a, b):
    return Point((a.x + b.x) // 2, (a.y + b.y) // 2)
"""


def synthetic_task(
    tmp_path: Path,
    hidden: dict[str, str],
    fail_to_pass: list[str],
    pass_to_pass: list[str] | None = None,
    command: str = "python -m pytest -q",
) -> TaskSpec:
    base, tests = tmp_path / "task" / "repo_snapshot", tmp_path / "task" / "tests"
    (base / "shapes").mkdir(parents=True)
    (base / "shapes" / "__init__.py").write_text(SHAPES)
    tests.mkdir()
    for name, text in hidden.items():
        (tests / name).write_text(textwrap.dedent(text).lstrip())
    return TaskSpec(
        task_id="shapes",
        base_dir=base,
        tests_dir=tests,
        fail_to_pass=tuple(fail_to_pass),
        pass_to_pass=tuple(pass_to_pass or ()),
        test_command=command,
        timeout_seconds=30,
    )
