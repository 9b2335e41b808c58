"""What the builder commands share: judge each built task alone, validate, store the build report.

Not a command (the leading underscore keeps Django from loading it as one).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser
from tqdm import tqdm

from core.vocabulary import Split
from sandbox import SandboxError
from sandbox.environments import EnvBuildError, Environment
from sandbox.hermetic import pytest_command
from tasks.builders.common import DEFAULT_TEST_COMMAND
from tasks.builders.environment import detect_environment, parse_variables, variable_argument
from tasks.builders.report import BuildReport
from tasks.environments import attach_environment, prepare_environment
from tasks.management.commands.rewrite_statements import rewrite_built
from tasks.models import Task, TaskSuite
from tasks.secrets import baseline_argument
from tasks.services import (
    COULD_NOT_VALIDATE,
    DEFAULT_SUITE,
    TaskImportResult,
    import_task_dirs,
    set_secrets_baseline,
)
from tasks.taskdir import TaskDirError, read_task_dir
from tasks.validation import NO_THRESHOLDS, Thresholds, ValidationReport
from tasks.validation_pool import default_jobs, validate_tasks

logger = logging.getLogger(__name__)


def add_common_arguments(parser: CommandParser) -> None:
    parser.add_argument("--suite", default=None)
    parser.add_argument(
        "--split", choices=list(Split), default=None, help="the suite's split (default: train for a new suite)"
    )
    parser.add_argument(
        "--test-command",
        default=DEFAULT_TEST_COMMAND,
        help=f"the tasks' test command, `pytest ...` or `python -m pytest ...` (default: {DEFAULT_TEST_COMMAND!r})",
    )
    parser.add_argument("--repo-name", default="", help="owner/name (default: from the origin remote's URL)")
    parser.add_argument(
        "--env",
        choices=["auto", "none"],
        default="auto",
        help="auto (default): give each task the environment its snapshot needs, built once per lock; "
        "none: run every task on the bare test runner",
    )
    add_environment_arguments(parser)
    parser.add_argument(
        "--secrets-baseline",
        type=baseline_argument,
        default=None,
        metavar="FILE",
        help="a detect-secrets baseline (or a JSON list of hashed_secret): the secrets it lists count as "
        "reviewed, stored on each built task for later validations",
    )
    parser.add_argument("--validate", action="store_true", help="validate each built task")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--revalidate", action="store_true", help="validate again the tasks an earlier run of the build validated"
    )
    add_validation_arguments(parser)


def add_validation_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "--jobs", type=int, default=None, help="validate this many tasks at once (default: one per CPU)"
    )
    parser.add_argument(
        "--min-statement-quality",
        type=float,
        default=0.0,
        help="a task whose statement scores below this (0..1, tasks.builders.statements.quality) is invalid",
    )
    parser.add_argument(
        "--test-strength",
        action="store_true",
        help="measure each task's test strength (the share of mutants of the fix its tests kill) and whether "
        "its tests reject a rewrite of the fix that does the same (brittle); one test run per mutant and rewrite",
    )
    parser.add_argument(
        "--min-test-strength",
        type=float,
        default=None,
        help="a task whose test strength is below this (0..1) is invalid (implies --test-strength)",
    )


def check_validation_arguments(options: dict[str, Any]) -> Thresholds:
    """The validation options checked (jobs filled in), and the thresholds they set."""
    if options["jobs"] is None:
        options["jobs"] = default_jobs()
    if options["jobs"] < 1:
        raise CommandError("--jobs must be at least 1")
    strength = options.get("min_test_strength")
    if strength is None and options.get("test_strength"):
        strength = 0.0
    try:
        return Thresholds(min_statement_quality=options["min_statement_quality"], min_test_strength=strength)
    except ValueError as exc:
        raise CommandError(f"{exc} (--min-statement-quality, --min-test-strength)") from None


def validation_options(options: dict[str, Any]) -> dict[str, Any]:
    """What `validate_and_store` takes from a builder's options, checked."""
    return {
        "thresholds": check_validation_arguments(options),
        "jobs": options["jobs"],
        "revalidate": options["revalidate"],
    }


def environment_options(options: dict[str, Any]) -> dict[str, Any]:
    """What chooses a build's environments (kept in its report's options): part of the resume key."""
    return {
        "env": options.get("env", "auto"),
        "pytest": options.get("pytest", ""),
        "test_env": sorted(options.get("test_env", [])),
    }


def built_before(suite: str | None, options: dict[str, Any]) -> dict[str, str]:
    """Task id -> base commit of the suite's tasks with this test command: what a re-run need not build again.

    Nothing, when the suite's last build chose environments otherwise (another `--pytest`,
    `--test-env` or `--env`): building again is how a broken environment is repaired, and every
    task must then be built again with the new one.
    """
    name = suite or DEFAULT_SUITE
    last = TaskSuite.objects.filter(name=name).values_list("build_report", flat=True).first() or {}
    before = environment_options(last.get("options", {})) if isinstance(last, dict) else {}
    if before and before != environment_options(options):
        return {}
    rows = Task.objects.filter(suite__name=name, test_command=options["test_command"])
    return dict(rows.values_list("task_id", "base_commit"))


def attach_environments(out: Path, options: dict[str, Any], report: BuildReport, quiet: bool, err: Any) -> None:
    """Name and build each built task's environment (tasks.environments) before the tasks are imported.

    Every task of a repository at one dependency lock shares one environment, built once; one that
    cannot be built is recorded on the task (validation then says so) and in the build report.
    """
    if options.get("env", "auto") == "none":
        return
    task_dirs = sorted(p for p in out.iterdir() if (p / "metadata.json").is_file())
    for task_dir in tqdm(task_dirs, desc="environments", unit="task", disable=quiet, file=err):
        _attach_one(task_dir, options, report)


def _attach_one(task_dir: Path, options: dict[str, Any], report: BuildReport) -> None:
    if options.get("env", "auto") == "none":
        return
    try:
        variables = parse_variables(options.get("test_env", []))
        prepared = attach_environment(task_dir, options.get("pytest", ""), report.repo, variables)
    except (OSError, ValueError) as exc:
        logger.warning("build: no environment for %s: %s", task_dir.name, exc)
        return
    if prepared is not None and not any(line.startswith(prepared.label()) for line in report.environments):
        report.environments = sorted([*report.environments, prepared.line()])


def import_as_built(
    task_dir: Path, options: dict[str, Any], report: BuildReport, result: TaskImportResult, candidate: str
) -> None:
    """Give one built task its environment and import it at once, so a build stopped half-way keeps it.

    A re-run then finds it in the suite and counts it as already built (`built_before`).
    """
    _attach_one(task_dir, options, report)
    try:
        one = import_task_dirs(task_dir, options["suite"], options["split"])
    except (TaskDirError, OSError, ValueError) as exc:
        report.built.remove(task_dir.name)
        report.skip(candidate, "", "the task directory is not importable", str(exc))
        return
    finally:
        shutil.rmtree(task_dir, ignore_errors=True)
    result.suite = one.suite
    result.created, result.updated, result.unchanged = (
        result.created + one.created,
        result.updated + one.updated,
        result.unchanged + one.unchanged,
    )


def repo_environment(repo: Path, options: dict[str, Any]) -> Environment | None:
    """The environment a whole repository's tests need (the mutation builder runs them at HEAD), built now."""
    if options.get("env", "auto") == "none":
        return None
    try:
        detected = detect_environment(repo, options.get("pytest", ""), parse_variables(options.get("test_env", [])))
    except EnvBuildError as exc:
        raise CommandError(f"{repo}: {exc}") from None
    if detected.spec is None:
        return None
    prepared = prepare_environment(detected.spec, repo.resolve().name)
    if prepared.environment is None:
        raise CommandError(f"{repo}: {prepared.line()}")
    return prepared.environment


def add_environment_arguments(parser: CommandParser) -> None:
    """How an environment is chosen, for the builders and `build_env` alike."""
    parser.add_argument("--pytest", default="", help="the environments' test runner, e.g. 'pytest<8' (default: chosen)")
    parser.add_argument(
        "--test-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=variable_argument,
        help="an environment variable the tests need (DJANGO_SETTINGS_MODULE=..., TZ=UTC); repeat for more",
    )


def finish_build(
    command: Any, report: BuildReport, result: TaskImportResult, options: dict[str, Any], validation: dict[str, Any]
) -> None:
    """What every builder does once its tasks are in the suite: say so, rewrite new statements, validate."""
    command.stdout.write(
        f"{len(report.built)} task(s) built into suite {result.suite}: {result.created} created, "
        f"{result.updated} updated, {result.unchanged} unchanged, {len(report.already_built)} already built"
    )
    new = [task_id for task_id in report.built if task_id not in report.already_built]
    rewrite_built(options, new, command.stdout, command.stderr._out)
    line = validate_and_store(
        report,
        result.suite,
        options["runs"],
        options["validate"],
        options["verbosity"] == 0,
        command.stderr._out,
        secrets_baseline=options["secrets_baseline"],
        **validation,
    )
    command.stdout.write(line)


def check_test_command(command: str) -> None:
    """Refuse, before anything is built, a test command the hermetic harness would refuse at every run."""
    try:
        pytest_command(command)
    except SandboxError as exc:
        raise CommandError(f"--test-command: {exc}") from None


def keep_if_readable(task_dir: Path, report: BuildReport, candidate: str, subject: str, suite: str | None) -> bool:
    """A written task directory the importer would refuse is dropped here, so it cannot sink the others."""
    reason, detail = "", ""
    try:
        read_task_dir(task_dir)
    except TaskDirError as exc:
        reason, detail = "the task directory is not importable", str(exc)
    owner = Task.objects.filter(task_id=task_dir.name).exclude(suite__name=suite or DEFAULT_SUITE).first()
    if owner is not None and not reason:
        reason, detail = "the task already belongs to another suite", owner.suite.name
    if reason:
        shutil.rmtree(task_dir, ignore_errors=True)
        report.skip(candidate, subject, reason, detail)
        return False
    report.built.append(task_dir.name)
    return True


def store_report(suite: str | None, split: str | None, report: BuildReport) -> None:
    """Keep a build's report on its suite (made now if new), where the suite page shows it."""
    stored, _ = TaskSuite.objects.get_or_create(
        name=suite or DEFAULT_SUITE, defaults={"split": split or TaskSuite.Split.TRAIN}
    )
    stored.build_report = report.to_json()
    stored.save(update_fields=["build_report"])


def validate_and_store(
    report: BuildReport,
    suite: str,
    runs: int,
    validate: bool,
    quiet: bool,
    err: Any,
    secrets_baseline: frozenset[str] | None = None,
    *,
    jobs: int = 1,
    revalidate: bool = False,
    thresholds: Thresholds = NO_THRESHOLDS,
) -> str:
    """Validate the built tasks, `jobs` at a time (one that cannot run is recorded, not raised); store the report.

    A task an earlier run of this build validated keeps its result unless `revalidate`: a build
    run again after an interruption validates only what was left.
    """
    if secrets_baseline is not None:
        set_secrets_baseline(Task.objects.filter(task_id__in=report.built), secrets_baseline)
    stored = TaskSuite.objects.filter(name=suite)
    if validate:
        todo = []
        for task in Task.objects.filter(suite__name=suite, task_id__in=report.built).order_by("task_id"):
            if revalidate or task.validation_status == Task.Validation.UNVALIDATED or not task.validation_report:
                todo.append(task)
                continue
            reasons = task.validation_report.get("reasons") or []
            report.validated(task.task_id, task.validation_status, [str(r) for r in reasons], earlier=True)
        with tqdm(total=len(todo), desc="validating", unit="task", disable=quiet, file=err) as bar:

            def done(task: Task, result: ValidationReport | None, error: str) -> None:
                bar.update()
                if result is None:
                    report.validated(task.task_id, COULD_NOT_VALIDATE, [f"validation could not run: {error}"])
                else:
                    report.validated(task.task_id, result.status, result.to_json()["reasons"])
                # Stored as it goes: a build stopped while validating leaves the report of what it did.
                stored.update(build_report=report.to_json())

            validate_tasks(todo, runs, done, jobs=jobs, thresholds=thresholds)
    stored.update(build_report=report.to_json())
    return summary(report.to_json())


def summary(data: Any) -> str:
    line = f"{data['candidates']} candidate(s) -> {data['built']} built"
    if data.get("already_built"):
        line += f" ({data['already_built']} already built)"
    if data["validated"]:
        line += f" -> {data['valid']} valid of {data['validated']} validated"
        if data.get("already_validated"):
            line += f" ({data['already_validated']} validated before)"
    skipped = "; ".join(f"{n} {reason}" for reason, n in data["skipped_by_reason"].items())
    return line + (f" (skipped: {skipped})" if skipped else "")
