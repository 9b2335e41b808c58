from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from sandbox import SandboxError
from tasks.builders.common import BuildError
from tasks.builders.synthetic import synthesize
from tasks.models import Task
from tasks.services import import_task_dirs, validate_task
from tasks.taskdir import TaskDirError


class Command(BaseCommand):
    help = "Inject bugs into a repository with mutation operators; keep only those its tests detect."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--repo", type=Path, required=True)
        parser.add_argument("--count", type=int, required=True)
        parser.add_argument("--suite", default=None)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--combine", type=int, default=0, help="also build up to N tasks joining two bugs")
        parser.add_argument("--validate", action="store_true")
        parser.add_argument("--runs", type=int, default=3)

    def handle(self, *args: Any, **options: Any) -> None:
        repo: Path = options["repo"]
        if not repo.is_dir():
            raise CommandError(f"{repo}: not a directory")
        quiet = options["verbosity"] == 0
        with (
            tempfile.TemporaryDirectory(prefix="crucible-synth-") as tmp,
            tqdm(total=options["count"], desc="mutants kept", unit="task", disable=quiet, file=self.stderr._out) as bar,
        ):

            def progress(kept: int, tried: int) -> None:
                bar.n = kept
                bar.set_postfix_str(f"{tried} tried")
                bar.refresh()

            try:
                built = synthesize(
                    repo, options["count"], options["seed"], Path(tmp), combined=options["combine"], progress=progress
                )
                result = import_task_dirs(Path(tmp), options["suite"])
            except (BuildError, TaskDirError, SandboxError) as exc:
                raise CommandError(str(exc)) from None
        self.stdout.write(
            f"{len(built)} task(s) into suite {result.suite}: {result.created} created, "
            f"{result.updated} updated, {result.unchanged} unchanged"
        )
        if options["validate"]:
            counts = {"valid": 0, "flaky": 0, "invalid": 0}
            for task in tqdm(
                list(Task.objects.filter(task_id__in=[p.name for p in built])),
                desc="validating",
                unit="task",
                disable=quiet,
                file=self.stderr._out,
            ):
                counts[validate_task(task, options["runs"]).status] += 1
            self.stdout.write(", ".join(f"{n} {s}" for s, n in counts.items()))
