from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from sandbox import SandboxError
from tasks.changes import ChangeError, change_test_command
from tasks.models import Task
from tasks.services import validate_task

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Give tasks a new test command (`pytest ...` or `python -m pytest ...`, checked as the harness would): "
        "one task, or every task of a suite. Each changed task gets a new version and is validated again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--task", help="a task id")
        which.add_argument("--suite", help="every task of this suite")
        parser.add_argument("command", help="the new test command, quoted")
        parser.add_argument("--runs", type=int, default=3, help="validation runs per task")
        parser.add_argument("--no-validate", action="store_true", help="change the command only")

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["runs"] <= 20:
            raise CommandError("--runs must be between 1 and 20")
        rows = (
            Task.objects.filter(task_id=options["task"])
            if options["task"]
            else Task.objects.filter(suite__name=options["suite"])
        )
        tasks = list(rows.order_by("task_id"))
        if not tasks:
            raise CommandError(
                f"no task {options['task']!r}" if options["task"] else f"no tasks in {options['suite']!r}"
            )
        changing = [task for task in tasks if task.test_command != options["command"]]
        try:
            change_test_command(changing, options["command"], runs=None)  # validated below, with a progress bar
        except ChangeError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"{len(changing)} task(s) now run {options['command']!r} ({len(tasks) - len(changing)} already did)"
        )
        if options["no_validate"] or not changing:
            return
        counts: Counter[str] = Counter()
        quiet = options["verbosity"] == 0
        for task in tqdm(changing, desc="validating", unit="task", disable=quiet, file=self.stderr._out):
            task.refresh_from_db()
            try:
                counts[validate_task(task, options["runs"]).status] += 1
            except (SandboxError, OSError) as exc:
                logger.warning("set_test_command: validating %s failed: %s", task.task_id, exc)
                counts["error"] += 1
        self.stdout.write(", ".join(f"{n} {status}" for status, n in sorted(counts.items())))
