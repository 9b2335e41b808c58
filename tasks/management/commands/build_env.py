from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from sandbox.environments import EnvBuildError
from tasks.builders.environment import detect_environment, parse_variables
from tasks.environments import prepare_environment
from tasks.management.commands._building import add_environment_arguments
from tasks.models import Task, TaskSuite
from tasks.repair import repair_environments
from tasks.services import validate_task
from tasks.spec import environment_spec

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Install a repository's test environment (its dependencies, test extras and test runner, from the "
        "package registry) into a content-addressed, read-only venv that every task of that repository shares. "
        "Builds once; a second run reuses it. Builders do this on their own for each task."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        what = parser.add_mutually_exclusive_group(required=True)
        what.add_argument("--repo", type=Path, metavar="DIR", help="a repository checkout (its files are read)")
        what.add_argument("--task", metavar="TASK_ID", help="the environment a stored task names")
        what.add_argument(
            "--suite",
            metavar="NAME",
            help="repair a suite in place: detect each task's environment again (with --pytest / --test-env), "
            "give the tasks whose environment changed the new one, build it",
        )
        parser.add_argument("--validate", action="store_true", help="with --suite: validate the changed tasks again")
        parser.add_argument("--runs", type=int, default=3, help="with --suite --validate: runs per task")
        add_environment_arguments(parser)
        parser.add_argument("--rebuild", action="store_true", help="resolve and install again, even if built")
        parser.add_argument(
            "--allow-sdist",
            action="store_true",
            help="also install source distributions (runs their build scripts on this host; wheels only by default)",
        )
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["suite"] is not None:
            self._repair(options)
            return
        repo_name = ""
        if options["repo"] is not None:
            repo: Path = options["repo"]
            if not repo.is_dir():
                raise CommandError(f"--repo {repo}: not a directory")
            try:
                detected = detect_environment(repo, options["pytest"], parse_variables(options["test_env"]))
            except EnvBuildError as exc:
                raise CommandError(str(exc)) from None
            for line in detected.skipped:
                self.stderr.write(f"left out: {line}")
            if detected.spec is None:
                self.stdout.write(f"{repo}: the test runner alone is enough (no dependencies, no src/ layout)")
                return
            spec, repo_name = detected.spec, repo.resolve().name
            self.stderr.write(f"read {', '.join(detected.sources) or 'no dependency files'}")
        else:
            task = Task.objects.filter(task_id=options["task"]).first()
            if task is None:
                raise CommandError(f"no task {options['task']!r}")
            try:
                found = environment_spec(task.metadata or {})
            except EnvBuildError as exc:
                raise CommandError(f"{task.task_id}: {exc}") from None
            if found is None:
                self.stdout.write(f"{task.task_id} names no environment: it runs on the test runner alone")
                return
            spec, repo_name = found, task.repo
        self.stderr.write(f"building the environment for {len(spec.requirements)} requirement(s)...")
        prepared = prepare_environment(spec, repo_name, rebuild=options["rebuild"], allow_sdist=options["allow_sdist"])
        if prepared.environment is None:
            raise CommandError(prepared.line())
        if options["json"]:
            self.stdout.write(json.dumps(prepared.environment.to_json() | {"path": str(prepared.environment.path)}))
        else:
            self.stdout.write(prepared.line())
            self.stdout.write(str(prepared.environment.path))

    def _repair(self, options: dict[str, Any]) -> None:
        suite = TaskSuite.objects.filter(name=options["suite"]).first()
        if suite is None:
            raise CommandError(f"no suite {options['suite']!r}")
        if not 1 <= options["runs"] <= 20:
            raise CommandError("--runs must be between 1 and 20")
        try:
            variables = parse_variables(options["test_env"])
        except EnvBuildError as exc:
            raise CommandError(str(exc)) from None
        repair = repair_environments(suite, options["pytest"], variables, rebuild=options["rebuild"])
        for task_id, error in repair.errors.items():
            self.stderr.write(f"{task_id}: no environment: {error}")
        for prepared in repair.environments:
            self.stdout.write(prepared.line())
        self.stdout.write(
            f"suite {suite.name}: {len(repair.changed)} task(s) given a new environment, {repair.unchanged} unchanged"
        )
        if options["validate"] and repair.changed:
            tasks = list(Task.objects.filter(task_id__in=repair.changed).order_by("task_id"))
            statuses: Counter[str] = Counter()
            for task in tqdm(tasks, desc="validating", unit="task", file=self.stderr._out,
                             disable=options["verbosity"] == 0):  # fmt: skip
                statuses[validate_task(task, options["runs"]).status] += 1
            self.stdout.write("validated again: " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))
        elif repair.changed:
            self.stdout.write(f"they are unvalidated: manage.py validate_tasks --suite {suite.name}")
