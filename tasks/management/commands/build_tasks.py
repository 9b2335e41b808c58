from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from sandbox import SandboxError
from tasks.builders import error_log, git_history
from tasks.builders.common import BuildError
from tasks.models import Task
from tasks.services import import_task_dirs, validate_task
from tasks.taskdir import TaskDirError


class Command(BaseCommand):
    help = "Build tasks from a repository's git history (--from-git) or from an error log (--from-log)."

    def add_arguments(self, parser: CommandParser) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--from-git", type=Path, metavar="REPO")
        source.add_argument("--from-log", type=Path, metavar="LOG")
        parser.add_argument("--repo", type=Path, help="the repository the log came from (with --from-log)")
        parser.add_argument("--test", action="append", default=[], help="failing test node id (with --from-log)")
        parser.add_argument("--patch", type=Path, help="expected patch (with --from-log, optional)")
        parser.add_argument("--suite", default=None)
        parser.add_argument("--max", type=int, default=50, help="at most this many tasks (--from-git)")
        parser.add_argument("--max-files", type=int, default=10)
        parser.add_argument("--max-lines", type=int, default=400)
        parser.add_argument("--issues", type=Path, help="JSON map of issue number -> {title, body}")
        parser.add_argument("--license", default="", help="SPDX licence of the repository, if known")
        parser.add_argument("--validate", action="store_true", help="validate each built task")
        parser.add_argument("--runs", type=int, default=3)

    def handle(self, *args: Any, **options: Any) -> None:
        quiet = options["verbosity"] == 0
        with tempfile.TemporaryDirectory(prefix="crucible-build-") as tmp:
            out = Path(tmp)
            try:
                built = self._from_git(options, out, quiet) if options["from_git"] else self._from_log(options, out)
                result = import_task_dirs(out, options["suite"])
            except (BuildError, TaskDirError, OSError, json.JSONDecodeError) as exc:
                raise CommandError(str(exc)) from None
        self.stdout.write(
            f"{len(built)} task(s) built into suite {result.suite}: {result.created} created, "
            f"{result.updated} updated, {result.unchanged} unchanged"
        )
        if options["validate"]:
            tasks = Task.objects.filter(task_id__in=built).order_by("task_id")
            counts = {"valid": 0, "flaky": 0, "invalid": 0}
            for task in tqdm(list(tasks), desc="validating", unit="task", disable=quiet, file=self.stderr._out):
                try:
                    counts[validate_task(task, options["runs"]).status] += 1
                except SandboxError as exc:
                    raise CommandError(str(exc)) from None
            self.stdout.write(", ".join(f"{n} {s}" for s, n in counts.items()))

    def _from_git(self, options: dict[str, Any], out: Path, quiet: bool) -> list[str]:
        repo: Path = options["from_git"]
        issues = json.loads(options["issues"].read_text()) if options["issues"] else {}
        found = git_history.candidates(repo, options["max_files"], options["max_lines"])[: options["max"]]
        if not found:
            raise BuildError(f"{repo}: no commit changes both code and tests within the size limits")
        built = []
        for candidate in tqdm(found, desc="building", unit="task", disable=quiet, file=self.stderr._out):
            built.append(
                git_history.build_task(repo, candidate, out, issues, repo.resolve().name, options["license"]).name
            )
        return built

    def _from_log(self, options: dict[str, Any], out: Path) -> list[str]:
        if options["repo"] is None or not options["repo"].is_dir():
            raise BuildError("--from-log needs --repo DIR, the repository the log came from")
        patch = options["patch"].read_text() if options["patch"] else ""
        task = error_log.build_task(
            options["repo"], options["from_log"].read_text(errors="replace"), out, options["test"] or None, patch
        )
        return [task.name]
