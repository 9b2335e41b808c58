from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sandbox.environments import EnvBuildError
from tasks.builders.environment import detect_environment, parse_variables
from tasks.environments import prepare_environment
from tasks.management.commands._building import add_environment_arguments
from tasks.models import Task
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
        add_environment_arguments(parser)
        parser.add_argument("--rebuild", action="store_true", help="resolve and install again, even if built")
        parser.add_argument(
            "--allow-sdist",
            action="store_true",
            help="also install source distributions (runs their build scripts on this host; wheels only by default)",
        )
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
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
