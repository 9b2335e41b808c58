from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from tasks.exports import iter_task_lines
from tasks.models import Task, TaskSuite
from trajectories.exports import iter_trajectory_lines
from trajectories.models import Trajectory


class Command(BaseCommand):
    help = "Export tasks or trajectories as JSONL, streaming; the output appears only when complete."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("what", choices=["tasks", "trajectories"])
        parser.add_argument("--format", choices=["jsonl"], default="jsonl")
        parser.add_argument("--out", type=Path, required=True)
        parser.add_argument("--suite", default=None, help="only this suite")

    def handle(self, *args: Any, **options: Any) -> None:
        out: Path = options["out"]
        suite = options["suite"]
        if suite is not None and not TaskSuite.objects.filter(name=suite).exists():
            raise CommandError(f"no suite named {suite!r}")
        if not out.parent.is_dir():
            raise CommandError(f"{out.parent}: no such directory")
        if options["what"] == "trajectories":
            qs = Trajectory.objects.all() if suite is None else Trajectory.objects.filter(suite__name=suite)
            lines, total, unit = iter_trajectory_lines(qs), qs.count(), "traj"
        else:
            tasks = Task.objects.all() if suite is None else Task.objects.filter(suite__name=suite)
            lines, total, unit = iter_task_lines(tasks), tasks.count(), "task"
        # Written beside the target and renamed, so a crash never leaves half a file
        # under the name a pipeline will read.
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
        count = 0
        try:
            with (
                os.fdopen(fd, "wb") as fh,
                tqdm(
                    total=total, unit=unit, desc="exporting", disable=options["verbosity"] == 0, file=self.stderr._out
                ) as bar,
            ):
                for line in lines:
                    fh.write(line)
                    count += 1
                    bar.update(1)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would surprise a pipeline
            os.replace(tmp, out)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.stdout.write(f"{count} {options['what']} written to {out}")
