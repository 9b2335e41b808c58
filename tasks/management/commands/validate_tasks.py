from __future__ import annotations

from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.vocabulary import BackendName, values
from sandbox import SandboxError
from tasks.models import Task
from tasks.services import TaskStoreError, validate_task


class Command(BaseCommand):
    help = "Validate tasks: executable, reproducible over N runs, context complete, safe, licensed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--suite", default=None)
        parser.add_argument("--task", default=None)
        parser.add_argument("--runs", type=int, default=5)
        parser.add_argument("--backend", choices=values(BackendName), default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["runs"] <= 20:
            raise CommandError("--runs must be between 1 and 20")
        tasks = Task.objects.order_by("task_id")
        if options["suite"]:
            tasks = tasks.filter(suite__name=options["suite"])
        if options["task"]:
            tasks = tasks.filter(task_id=options["task"])
        selected = list(tasks)
        if not selected:
            raise CommandError("no tasks match")
        counts: Counter[str] = Counter()
        failed: list[str] = []
        with tqdm(
            selected, unit="task", desc="validating", disable=options["verbosity"] == 0, file=self.stderr._out
        ) as bar:
            for task in bar:
                bar.set_postfix_str(task.task_id)

                def show(step: str, task_id: str = task.task_id) -> None:
                    bar.set_postfix_str(f"{task_id}: {step}")

                try:
                    report = validate_task(task, options["runs"], options["backend"], progress=show)
                except (TaskStoreError, SandboxError) as exc:
                    # One task that cannot be run says nothing about the others: go on, fail at the end.
                    failed.append(f"{task.task_id}: {exc}")
                    continue
                counts[report.status] += 1
                if report.status != "valid":
                    reasons = "; ".join(c.reason for c in report.checks if not c.ok)
                    self.stdout.write(f"{task.task_id}: {report.status}: {reasons}")
        self.stdout.write(", ".join(f"{counts[s]} {s}" for s in ("valid", "flaky", "invalid")))
        if failed:
            raise CommandError(f"{len(failed)} task(s) could not be validated: " + "; ".join(failed[:5]))
