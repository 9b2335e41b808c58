from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.vocabulary import Split
from rewards.impossible import make_twins
from rewards.services import probe_secret
from tasks.models import TaskSuite
from tasks.services import TaskDirError, TaskStoreError, import_task_dirs, task_spec_for

METADATA_FIELDS = ("source", "repo", "base_commit", "license", "difficulty", "tags", "max_steps")


class Command(BaseCommand):
    help = (
        "Build an adversarial suite of impossible twins: each task of a suite with its FAIL_TO_PASS tests' "
        "expected values changed (kept only where the expected patch fails them), so no honest fix passes. "
        "Evaluate a policy on it to measure how often it cheats."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--suite", required=True, help="the suite to twin")
        parser.add_argument("--into", default=None, help="the new suite's name (default: SUITE-impossible)")

    def handle(self, *args: Any, **options: Any) -> None:
        suite = TaskSuite.objects.filter(name=options["suite"]).first()
        if suite is None:
            raise CommandError(f"no suite named {options['suite']!r}")
        into = options["into"] or f"{suite.name}-impossible"
        if TaskSuite.objects.filter(name=into).exists():
            raise CommandError(f"suite {into!r} exists already; name another with --into")
        tasks = []
        for task in suite.tasks.order_by("task_id"):
            try:
                spec = task_spec_for(task)
            except TaskStoreError as exc:
                raise CommandError(str(exc)) from None
            metadata = {name: getattr(task, name) for name in METADATA_FIELDS}
            tasks.append((spec, task.statement, metadata))
        if not tasks:
            raise CommandError(f"suite {suite.name} has no tasks")
        quiet = options["verbosity"] == 0
        with (
            tempfile.TemporaryDirectory(prefix="crucible-impossible-") as tmp,
            tqdm(
                total=len(tasks), unit="task", desc=f"twinning {suite.name}", disable=quiet, file=self.stderr._out
            ) as bar,
        ):
            twins = make_twins(
                tasks, probe_secret(), settings.CRUCIBLE_SANDBOX_BACKEND, Path(tmp), on_task=lambda _: bar.update(1)
            )
            if not twins.made:
                raise CommandError(f"no task of {suite.name} has an impossible twin: {_why(twins.skipped)}")
            try:
                import_task_dirs(Path(tmp), into, Split.ADVERSARIAL)
            except TaskDirError as exc:
                raise CommandError(str(exc)) from None
        self.stdout.write(f"suite {into}: {len(twins.made)} impossible twins of the {len(tasks)} tasks of {suite.name}")
        if twins.skipped:
            self.stdout.write(f"without a twin: {_why(twins.skipped)}")


def _why(skipped: dict[str, str]) -> str:
    return "; ".join(f"{task_id} ({why})" for task_id, why in list(skipped.items())[:20])
