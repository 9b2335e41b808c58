from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError
from tqdm import tqdm

from trajectories.interchange.common import InterchangeError
from trajectories.interchange.importers import CONVERTERS, import_foreign
from trajectories.schema import RecordError
from trajectories.services import TrajectoryImportResult, import_trajectories

CRUCIBLE = "crucible"


class Command(BaseCommand):
    help = (
        "Import trajectories, all or nothing: Crucible JSONL (one trajectory per line), or SWE-agent .traj, "
        "mini-swe-agent, OpenHands or ATIF trajectory files (--format)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", type=Path, nargs="+", metavar="file")
        parser.add_argument(
            "--format",
            choices=[CRUCIBLE, *CONVERTERS],
            default=CRUCIBLE,
            help="crucible: JSONL; the others: one trajectory file each (an OpenHands output.jsonl or an ATIF "
            ".jsonl: one per line)",
        )
        parser.add_argument(
            "--task-id",
            default=None,
            help="foreign formats: the task the trajectories ran on (default: the file name, e.g. "
            "django__django-11099.traj -> django__django-11099)",
        )
        parser.add_argument(
            "--allow-unknown-tasks",
            action="store_true",
            help="keep trajectories whose task is not in this database (unlinked: not scored or replayed)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        paths: list[Path] = options["files"]
        for path in paths:
            if not path.is_file():
                raise CommandError(f"{path}: no such file")
        fmt = options["format"]
        if fmt == CRUCIBLE:
            if len(paths) != 1 or options["task_id"]:
                raise CommandError("a Crucible JSONL import takes one file and no --task-id")
            result = self._crucible(paths[0], options)
        else:
            try:
                result = import_foreign(
                    paths, fmt, task_id=options["task_id"], allow_unknown_tasks=options["allow_unknown_tasks"]
                )
            except InterchangeError as exc:
                raise CommandError(f"{exc}; nothing was imported") from None
        self.stdout.write(
            f"{result.created} trajectories ({result.steps} steps) imported, {result.skipped} already present"
        )

    def _crucible(self, path: Path, options: dict[str, Any]) -> TrajectoryImportResult:
        with tqdm(
            total=path.stat().st_size,
            unit="B",
            unit_scale=True,
            desc="importing",
            disable=options["verbosity"] == 0,
            file=self.stderr._out,
        ) as bar:
            try:
                return import_trajectories(
                    path, on_bytes=bar.update, allow_unknown_tasks=options["allow_unknown_tasks"]
                )
            except RecordError as exc:
                raise CommandError(f"{path}: {exc}; nothing was imported") from None
            except DatabaseError as exc:
                # The file's one transaction went with the connection: say so in a line, not a traceback.
                reason = " ".join(str(exc).split())[:300] or type(exc).__name__
                raise CommandError(f"{path}: the database failed mid-import ({reason}); nothing was imported") from None
