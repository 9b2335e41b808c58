from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tasks.decontamination import TaskView, check
from tasks.models import Task, TaskSuite
from tasks.storage import tree_path


def views(suites: list[str]) -> list[TaskView]:
    return [
        TaskView(t.task_id, t.repo, t.statement, t.expected_patch, tree_path(t.snapshot_hash))
        for t in Task.objects.filter(suite__name__in=suites).order_by("task_id")
    ]


class Command(BaseCommand):
    help = "Check an eval (or adversarial) suite against train suites for contamination."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--eval", required=True, dest="eval_suite")
        parser.add_argument("--train", action="append", default=[], help="train suite (default: every train suite)")
        parser.add_argument("--threshold", type=float, default=0.5)
        parser.add_argument("--strict", action="store_true", help="fail when anything is found")

    def handle(self, *args: Any, **options: Any) -> None:
        suite = TaskSuite.objects.filter(name=options["eval_suite"]).first()
        if suite is None:
            raise CommandError(f"no suite named {options['eval_suite']!r}")
        if suite.split == TaskSuite.Split.TRAIN:
            raise CommandError(f"suite {suite.name!r} is a train suite; check an eval or adversarial one")
        train = options["train"] or list(
            TaskSuite.objects.filter(split=TaskSuite.Split.TRAIN).values_list("name", flat=True)
        )
        unknown = set(train) - set(TaskSuite.objects.filter(name__in=train).values_list("name", flat=True))
        if unknown:
            raise CommandError(f"no suite named {', '.join(sorted(unknown))}")
        findings = check(views([suite.name]), views(train), options["threshold"])
        for f in findings:
            self.stdout.write(f"{f.eval_task} ~ {f.train_task}: {f.kind}: {f.detail}")
        self.stdout.write(
            f"{len(findings)} contamination finding(s) between {suite.name} and {', '.join(train) or '-'}"
        )
        if findings and options["strict"]:
            raise CommandError(f"{suite.name} is contaminated by the train split")
