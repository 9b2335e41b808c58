from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from sandbox import SandboxError
from sandbox.core import make_backend
from sandbox.names import DEFAULT_BACKEND
from sandbox.node_env import NodeEnvError
from tasks.builders import lang_history
from tasks.builders.common import BuildError, repo_name
from tasks.builders.lang_mutation import synthesize_lang
from tasks.builders.report import BuildReport
from tasks.builders.synthetic import synthesize
from tasks.lang_tests import PYTHON
from tasks.management.commands._building import (
    add_common_arguments,
    attach_environments,
    built_before,
    check_test_command,
    environment_options,
    finish_build,
    keep_if_readable,
    repo_environment,
    validation_options,
)
from tasks.management.commands.rewrite_statements import add_rewrite_arguments
from tasks.services import DEFAULT_SUITE, TaskImportResult, import_task_dirs
from tasks.taskdir import TaskDirError


class Command(BaseCommand):
    help = "Inject bugs into a repository with mutation operators; keep only those its tests detect."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--repo", type=Path, required=True)
        parser.add_argument("--count", type=int, required=True)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--combine", type=int, default=0, help="also build up to N tasks joining two bugs")
        add_common_arguments(parser)
        add_rewrite_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        repo: Path = options["repo"]
        if not repo.is_dir():
            raise CommandError(f"{repo}: not a directory")
        check_test_command(options["test_command"])
        validation = validation_options(options)
        quiet = options["verbosity"] == 0
        name = repo_name(repo, options["repo_name"])
        language = lang_history.tree_language(repo)
        if language != PYTHON:
            finish_build(self, *self._language_tasks(repo, language, name, options, quiet), options, validation)
            return
        report = BuildReport(
            "synthetic_mutation",
            name,
            {k: options[k] for k in ("count", "seed", "combine", "test_command")} | environment_options(options),
        )
        with (
            tempfile.TemporaryDirectory(prefix="crucible-synth-") as tmp,
            tqdm(total=options["count"], desc="mutants kept", unit="task", disable=quiet, file=self.stderr._out) as bar,
        ):
            try:
                environment = repo_environment(repo, options)
                built = synthesize(
                    repo,
                    options["count"],
                    options["seed"],
                    Path(tmp),
                    combined=options["combine"],
                    progress=_progress(bar),
                    name=name,
                    test_command=options["test_command"],
                    report=report,
                    environment=environment,
                    # A re-run (after an interruption, or with a larger --count) tests only new mutants.
                    existing=built_before(options["suite"], options),
                )
                for task_dir in built:
                    keep_if_readable(task_dir, report, task_dir.name, "", options["suite"])
                if built:
                    attach_environments(Path(tmp), options, report, quiet, self.stderr._out)
                    result = import_task_dirs(Path(tmp), options["suite"], options["split"])
                else:  # an earlier run built them all
                    result = TaskImportResult(options["suite"] or DEFAULT_SUITE)
            except (BuildError, TaskDirError, SandboxError) as exc:
                raise CommandError(str(exc)) from None
        finish_build(self, report, result, options, validation)

    def _language_tasks(
        self, repo: Path, language: str, name: str, options: dict[str, Any], quiet: bool
    ) -> tuple[BuildReport, TaskImportResult]:
        """A Go or JavaScript repository: single-operator mutants its tests notice (tasks.builders.lang_mutation)."""
        if options["combine"]:
            raise CommandError("--combine joins Python mutants; a Go or JavaScript mutant is one flipped operator")
        settings = {k: options[k] for k in ("count", "seed")} | {"language": language}
        report = BuildReport("synthetic_mutation", name, settings)
        with (
            tempfile.TemporaryDirectory(prefix="crucible-synth-") as tmp,
            tqdm(total=options["count"], desc="mutants kept", unit="task", disable=quiet, file=self.stderr._out) as bar,
        ):
            try:
                backend = make_backend(DEFAULT_BACKEND)
                built = synthesize_lang(
                    repo, language, options["count"], options["seed"], Path(tmp), backend, name, _progress(bar)
                )
                for task_dir in built:
                    keep_if_readable(task_dir, report, task_dir.name, "", options["suite"])
                if not built:
                    raise BuildError(f"no mutant of the first {options['count'] * 8} tried was noticed by the tests")
                result = import_task_dirs(Path(tmp), options["suite"], options["split"])
            except (BuildError, TaskDirError, SandboxError, NodeEnvError) as exc:
                raise CommandError(str(exc)) from None
        return report, result


def _progress(bar: tqdm) -> Callable[[int, int], None]:
    """A builder's (kept, tried) progress on the bar."""

    def progress(kept: int, tried: int) -> None:
        bar.n = kept
        bar.set_postfix_str(f"{tried} tried")
        bar.refresh()

    return progress
