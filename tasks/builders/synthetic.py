"""Synthetic bug injection checked by mutation testing.

A mutant becomes a task only when the repository's own tests notice it: at least one
test that passes on the original fails on the mutant, and nothing times out. The
expected patch is the reverse diff; the statement is written from the failing
output (assertion messages, not test names or the change itself).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from core.vocabulary import DEFAULT_BACKEND, TaskSource
from patches import render, text_patch
from sandbox import Limits, Sandbox
from sandbox.backends.base import Backend
from sandbox.environments import Environment
from sandbox.results import Outcome, TestReport
from tasks.builders import statements
from tasks.builders.common import DEFAULT_TEST_COMMAND, BuildError, common_dir, task_slug, write_task_dir
from tasks.builders.mutation import Mutant, combine, mutants_for_repo, sample_mutants
from tasks.builders.report import BuildReport
from tasks.storage import iter_tree

UNDETECTED = "the tests do not notice it (or it timed out)"


@dataclass
class Detected:
    mutants: list[Mutant]
    killed: list[str]  # tests that pass on the original and fail on the mutant
    still_passing: list[str]
    messages: list[str]


def _apply_mutants(workspace: Path, mutants: list[Mutant]) -> None:
    for mutant in mutants:
        (workspace / mutant.path).write_text(mutant.mutated)


def _run(
    repo: Path,
    mutants: list[Mutant],
    backend: Backend | str,
    timeout: float,
    command: str = DEFAULT_TEST_COMMAND,
    environment: Environment | None = None,
) -> TestReport:
    with Sandbox(repo, backend, limits=Limits(wall_seconds=timeout), environment=environment) as box:
        _apply_mutants(box.workspace, mutants)
        return box.run_tests((), command=command)


def baseline(
    repo: Path, backend: Backend | str, command: str = DEFAULT_TEST_COMMAND, environment: Environment | None = None
) -> tuple[set[str], float]:
    report = _run(repo, [], backend, 300, command, environment)
    # An xfail-marked test passes or fails by its marker's say as much as by the code's: not a detector.
    passing = {node for node, t in report.tests.items() if t.outcome == Outcome.PASSED and not t.xfail}
    if not report.valid or not passing:
        raise BuildError(
            f"{repo}: the repository's tests must pass before bugs are injected "
            f"({'; '.join(report.inconsistencies) or 'no passing test'})"
        )
    return passing, report.exec.duration_ms / 1000


def detect(
    repo: Path,
    mutants: list[Mutant],
    passing: set[str],
    backend: Backend | str,
    timeout: float,
    command: str = DEFAULT_TEST_COMMAND,
    environment: Environment | None = None,
) -> Detected | None:
    report = _run(repo, mutants, backend, timeout, command, environment)
    if report.exec.timed_out:
        return None  # an endless loop is not a bug an agent can be scored on fairly
    killed = sorted(node for node in passing if not report.passed(node))
    if not killed:
        return None
    messages = [report.tests[n].message for n in killed if n in report.tests and report.tests[n].message]
    return Detected(mutants, killed, sorted(passing - set(killed)), messages)


ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


def statement_for(found: Detected) -> str:
    """What a user of the code would see: which behaviours broke and what the failures say.

    Test ids are not shown (an agent would only rerun them); their names, made readable, and the
    assertion messages are, cleaned of sandbox paths and object addresses that change run to run.
    """
    modules = sorted({m.path for m in found.mutants})
    messages = [statements.SANDBOX_PATH.sub("…", ADDRESS.sub("0x…", m)) for m in found.messages]
    shown = [m for m in dict.fromkeys(messages) if m][:3] or ["(the failures carry no message)"]
    broken = list(dict.fromkeys(statements.humanise(node.split("::")[-1].split("[")[0]) for node in found.killed))
    where = ", ".join(f"`{p}`" for p in modules)
    text = "\n".join(f"- {m}" for m in shown)
    behaviours = "\n".join(f"- {name}" for name in broken[:5])
    more = f"\n- … and {len(broken) - 5} more" if len(broken) > 5 else ""
    return (
        f"# Regression in {where}\n\nAfter a recent change, {len(found.killed)} of the project's tests fail. "
        f"Behaviour that broke:\n\n{behaviours}{more}\n\nThe failures report:\n\n{text}\n\n"
        "Find the bug in the library code and fix it; the tests are right.\n"
    )


def task_id_for(repo_name: str, mutants: list[Mutant]) -> str:
    key = "".join(m.mutated for m in mutants).encode()
    return f"{task_slug(repo_name)}-mut-{hashlib.sha256(key).hexdigest()[:10]}"


def write_task(
    repo: Path,
    found: Detected,
    out: Path,
    repo_name: str,
    test_files: list[str],
    test_command: str = DEFAULT_TEST_COMMAND,
) -> Path:
    with tempfile.TemporaryDirectory(prefix="crucible-synth-") as tmp:
        snapshot = Path(tmp) / "snapshot"
        shutil.copytree(repo, snapshot, ignore=shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache"))
        _apply_mutants(snapshot, found.mutants)
        patch = render([p for m in found.mutants if (p := text_patch(m.path, m.mutated, m.original)) is not None])
        task_id = task_id_for(repo_name, found.mutants)
        hidden = {f: (repo / f).read_bytes() for f in test_files}
        metadata = {
            "source": TaskSource.SYNTHETIC_MUTATION,
            "repo": repo_name,
            "test_command": test_command,
            "fail_to_pass": found.killed,
            "pass_to_pass": found.still_passing,
            "tags": ["synthetic", *sorted({m.operator for m in found.mutants})],
            # How the bug was made, for audit: generated data keeps the record of its generation.
            "mutation": [
                {
                    "path": m.path,
                    "operator": m.operator,
                    "description": m.description,
                    "line": m.line,
                    "function": m.function,
                }
                for m in found.mutants
            ],
        }
        return write_task_dir(
            out, task_id, statement_for(found), snapshot, hidden, common_dir(test_files), patch, metadata
        )


def synthesize(
    repo: Path,
    count: int,
    seed: int,
    out: Path,
    backend: Backend | str = DEFAULT_BACKEND,
    combined: int = 0,
    progress: Callable[[int, int], None] = lambda kept, tried: None,
    *,
    name: str = "",
    test_command: str = DEFAULT_TEST_COMMAND,
    report: BuildReport | None = None,
    environment: Environment | None = None,
    existing: Collection[str] = (),
) -> list[Path]:
    """Up to `count` single-bug tasks, then up to `combined` tasks joining two of them.

    Every mutant tried is a candidate of `report`: kept, or skipped with the reason. The
    repository's tests run in `environment` (its dependencies) when it needs one. A mutant whose
    task id is in `existing` (an earlier run of the same build made it) is kept without a test run.
    """
    report = report if report is not None else BuildReport("synthetic_mutation", name)
    if count < 1:
        raise BuildError("count must be at least 1")
    iter_tree(repo)  # refuses symlinks out of the repository
    passing, seconds = baseline(repo, backend, test_command, environment)
    timeout = max(10.0, 3 * seconds + 5)
    test_files = sorted({node.split("::")[0] for node in passing})
    candidates = sample_mutants(mutants_for_repo(repo), 10_000, seed)
    if not candidates:
        raise BuildError(f"{repo}: no Python code to mutate")
    kept: list[Mutant] = []
    built: list[Path] = []
    name = name or repo.resolve().name
    for tried, mutant in enumerate(candidates, 1):
        if len(kept) >= count:
            break
        report.candidates += 1
        if (task_id := task_id_for(name, [mutant])) in existing:
            report.resumed(task_id)
            kept.append(mutant)
            progress(len(kept), tried)
            continue
        found = detect(repo, [mutant], passing, backend, timeout, test_command, environment)
        progress(len(kept) + (found is not None), tried)
        if found is None:
            report.skip(f"{mutant.path}:{mutant.line}", mutant.description, UNDETECTED)
            continue
        kept.append(mutant)
        built.append(write_task(repo, found, out, name, test_files, test_command))
    for first, second in zip(kept[::2], kept[1::2], strict=False):
        if combined <= 0:
            break
        pair = _pair(first, second)
        if pair and (task_id := task_id_for(name, pair)) in existing:
            report.resumed(task_id)
            combined -= 1
            continue
        found = detect(repo, pair, passing, backend, timeout, test_command, environment) if pair else None
        if found is not None:
            built.append(write_task(repo, found, out, name, test_files, test_command))
            combined -= 1
    return built


def _pair(a: Mutant, b: Mutant) -> list[Mutant] | None:
    if a.path == b.path:
        joined = combine(a, b)
        return [joined] if joined is not None else None
    return [a, b]
