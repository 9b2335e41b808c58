from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.vocabulary import BackendName, values
from rewards.services import RewardError, check_reward_sanity, spec_from_option
from rewards.spec import SpecError
from tasks.models import Task
from tasks.services import TaskStoreError


class Command(BaseCommand):
    help = "Check per task that the reward separates the expected patch from empty and stub patches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--suite", default=None)
        parser.add_argument("--task", default=None)
        parser.add_argument("--spec", default=None)
        parser.add_argument(
            "--backend",
            choices=values(BackendName),
            default=settings.CRUCIBLE_SANDBOX_BACKEND,
            help="sandbox backend (default: CRUCIBLE_SANDBOX_BACKEND, %(default)s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        tasks = Task.objects.exclude(expected_patch="").order_by("task_id")
        if options["suite"]:
            tasks = tasks.filter(suite__name=options["suite"])
        if options["task"]:
            tasks = tasks.filter(task_id=options["task"])
        if not tasks.exists():
            raise CommandError("no tasks with an expected patch match")
        try:
            spec = spec_from_option(options["spec"])
        except SpecError as exc:
            raise CommandError(str(exc)) from None
        blind = []
        for task in tqdm(
            list(tasks), desc="checking rewards", unit="task", disable=options["verbosity"] == 0, file=self.stderr._out
        ):
            try:
                row = check_reward_sanity(task, spec, options["backend"])
            except (RewardError, TaskStoreError) as exc:
                raise CommandError(str(exc)) from None
            stubs = " ".join(f"{k}={v:g}" for k, v in row.stubs.items())
            self.stdout.write(
                f"{task.task_id}: expected {row.expected:g}, empty {row.empty:g}, {stubs}; gap {row.gap:g}"
                f"{'' if row.separates else '  <- cannot tell good from bad'}"
            )
            if not row.separates:
                blind.append(task.task_id)
        self.stdout.write(
            f"{len(blind)} task(s) whose reward cannot tell them apart" + (f": {', '.join(blind)}" if blind else "")
        )
