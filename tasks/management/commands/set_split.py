from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.vocabulary import Split
from sandbox import SandboxError
from tasks.changes import ChangeError, change_split
from tasks.models import TaskSuite
from tasks.services import validate_task

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Change an existing suite's split (train, eval, adversarial) and validate its tasks again, "
        "so `check_splits` can then check it against the train suites."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("suite")
        parser.add_argument("split", choices=list(Split))
        parser.add_argument("--runs", type=int, default=3, help="validation runs per task")
        parser.add_argument("--no-validate", action="store_true", help="change the split only")

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["runs"] <= 20:
            raise CommandError("--runs must be between 1 and 20")
        suite = TaskSuite.objects.filter(name=options["suite"]).first()
        if suite is None:
            raise CommandError(f"no suite named {options['suite']!r}")
        before = suite.split
        try:
            change_split(suite, options["split"], runs=None)  # validated below, with a progress bar
        except ChangeError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"suite {suite.name}: split {before} -> {suite.split}")
        if options["no_validate"]:
            return
        counts: Counter[str] = Counter()
        tasks = list(suite.tasks.order_by("task_id"))
        quiet = options["verbosity"] == 0
        for task in tqdm(tasks, desc="validating", unit="task", disable=quiet, file=self.stderr._out):
            try:
                counts[validate_task(task, options["runs"]).status] += 1
            except (SandboxError, OSError) as exc:
                # One task that cannot be run says nothing about the others.
                logger.warning("set_split: validating %s failed: %s", task.task_id, exc)
                counts["error"] += 1
        self.stdout.write(", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no tasks")
