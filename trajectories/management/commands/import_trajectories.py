from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from trajectories.schema import RecordError
from trajectories.services import import_trajectories


class Command(BaseCommand):
    help = "Import trajectories from a JSONL file (one trajectory per line), all or nothing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument(
            "--allow-unknown-tasks",
            action="store_true",
            help="keep trajectories whose task is not in this database (unlinked: not scored or replayed)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        with tqdm(
            total=path.stat().st_size,
            unit="B",
            unit_scale=True,
            desc="importing",
            disable=options["verbosity"] == 0,
            file=self.stderr._out,
        ) as bar:
            try:
                result = import_trajectories(
                    path, on_bytes=bar.update, allow_unknown_tasks=options["allow_unknown_tasks"]
                )
            except RecordError as exc:
                raise CommandError(f"{path}: {exc}; nothing was imported") from None
        self.stdout.write(
            f"{result.created} trajectories ({result.steps} steps) imported, {result.skipped} already present"
        )
