from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.vocabulary import Split, values
from tasks.builders import swebench
from tasks.builders.common import BuildError
from tasks.harbor_import import import_harbor_dirs
from tasks.services import TaskImportResult, import_task_dirs
from tasks.storage import TreeError
from tasks.taskdir import TaskDirError


class Command(BaseCommand):
    help = (
        "Import task directories (one, a folder of them, or a .tar/.tar.gz/.zip of either) or SWE-bench JSONL "
        "into a suite; --format harbor reads Harbor task directories (one, a dataset folder of them, or an archive). "
        "Links and special files are refused, in folders and archives alike."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument(
            "--format",
            choices=("taskdir", "harbor"),
            default="taskdir",
            help="taskdir: Crucible task directories (SWE-bench JSONL by its suffix); harbor: Harbor task directories",
        )
        parser.add_argument("--suite", default=None, help="suite name (default: 'default')")
        parser.add_argument("--split", choices=values(Split), default=None)
        parser.add_argument(
            "--repos",
            type=Path,
            default=None,
            help="for SWE-bench JSONL: a folder with a local clone of each repository",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["path"]

        def progress(items: Any) -> Any:
            return tqdm(
                items, desc="reading tasks", unit="task", disable=options["verbosity"] == 0, file=self.stderr._out
            )

        try:
            if options["format"] == "harbor":
                result = import_harbor_dirs(path, options["suite"], options["split"], progress=progress)
            elif path.suffix == ".jsonl":
                result = self._swebench(path, options, progress)
            else:
                result = import_task_dirs(path, options["suite"], options["split"], progress=progress)
        except (TaskDirError, TreeError, BuildError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"suite {result.suite}: {result.created} created, {result.updated} updated, {result.unchanged} unchanged"
        )

    def _swebench(self, path: Path, options: dict[str, Any], progress: Any) -> TaskImportResult:
        repos: Path | None = options["repos"]
        if repos is None or not repos.is_dir():
            raise BuildError("SWE-bench JSONL needs --repos DIR with a local clone of each repository")
        if not path.is_file():
            raise BuildError(f"{path}: no such file")
        with tempfile.TemporaryDirectory(prefix="crucible-swebench-") as tmp:
            swebench.build_all(path, repos, Path(tmp))
            return import_task_dirs(Path(tmp), options["suite"], options["split"], progress=progress)
