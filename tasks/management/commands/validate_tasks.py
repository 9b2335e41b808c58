from __future__ import annotations

from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.vocabulary import BackendName, values
from tasks.management.commands._building import add_validation_arguments, check_validation_arguments
from tasks.models import Task
from tasks.secrets import baseline_argument
from tasks.services import set_secrets_baseline
from tasks.validation import ValidationReport
from tasks.validation_pool import validate_tasks


class Command(BaseCommand):
    help = "Validate tasks: executable, reproducible over N runs, context complete, safe, licensed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--suite", default=None)
        parser.add_argument("--task", default=None)
        parser.add_argument("--runs", type=int, default=5)
        parser.add_argument("--backend", choices=values(BackendName), default=None)
        parser.add_argument(
            "--skip-validated", action="store_true", help="leave out tasks that already have a validation report"
        )
        add_validation_arguments(parser)
        parser.add_argument(
            "--secrets-baseline",
            type=baseline_argument,
            default=None,
            metavar="FILE",
            help="a detect-secrets baseline: the secrets it lists count as reviewed; stored on the selected "
            "tasks for later validations",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["runs"] <= 20:
            raise CommandError("--runs must be between 1 and 20")
        thresholds = check_validation_arguments(options)
        tasks = Task.objects.order_by("task_id")
        if options["suite"]:
            tasks = tasks.filter(suite__name=options["suite"])
        if options["task"]:
            tasks = tasks.filter(task_id=options["task"])
        if options["skip_validated"]:
            tasks = tasks.filter(validation_status=Task.Validation.UNVALIDATED)
        selected = list(tasks)
        if not selected:
            raise CommandError("no tasks match")
        if options["secrets_baseline"] is not None:
            set_secrets_baseline(selected, options["secrets_baseline"])
        counts: Counter[str] = Counter()
        failed: list[str] = []
        quiet = options["verbosity"] == 0
        with tqdm(total=len(selected), unit="task", desc="validating", disable=quiet, file=self.stderr._out) as bar:

            def done(task: Task, report: ValidationReport | None, error: str) -> None:
                bar.update()
                if report is None:
                    # One task that cannot be run says nothing about the others: go on, fail at the end.
                    failed.append(f"{task.task_id}: {error}")
                    return
                counts[report.status] += 1
                if report.status != "valid":
                    reasons = "; ".join(c.reason for c in report.checks if not c.ok)
                    self.stdout.write(f"{task.task_id}: {report.status}: {reasons}")

            validate_tasks(
                selected,
                options["runs"],
                done,
                jobs=options["jobs"],
                backend=options["backend"],
                thresholds=thresholds,
                progress=lambda task, step: bar.set_postfix_str(f"{task.task_id}: {step}"),
            )
        self.stdout.write(", ".join(f"{counts[s]} {s}" for s in ("valid", "flaky", "invalid")))
        if failed:
            raise CommandError(f"{len(failed)} task(s) could not be validated: " + "; ".join(sorted(failed)[:5]))
