from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tasks.storage import TreeError
from tasks.taskdir import TaskDirError


class Command(BaseCommand):
    help = "Import task directories (one, or a folder of them) into a suite."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument("--suite", default=None, help="suite name (default: 'default')")
        parser.add_argument("--split", choices=TaskSuite.Split.values, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["path"]

        def progress(items: Any) -> Any:
            return tqdm(items, desc="reading tasks", unit="task", disable=options["verbosity"] == 0, file=self.stderr._out)

        try:
            result = import_task_dirs(path, options["suite"], options["split"], progress=progress)
        except (TaskDirError, TreeError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"suite {result.suite}: {result.created} created, {result.updated} updated, {result.unchanged} unchanged"
        )
