"""`manage.py export KIND`: every kind of dataset Crucible hands to other tools, streamed.

It lives in the top layer because it reaches every app: tasks, trajectories, people's
preferences (annotation) and frozen training sets (training).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from annotation.models import ComparisonSet
from annotation.preferences import iter_preference_rows, write_jsonl, write_parquet
from tasks.exports import iter_task_lines
from tasks.models import Task, TaskSuite
from training.queries import export_lines, find_training_set
from trajectories.exports import finished_only, iter_trajectory_lines
from trajectories.models import Trajectory


@dataclass
class Plan:
    rows: Iterator[Any]
    write: Callable[[Iterable[Any], Path], int]
    total: int | None
    unit: str
    noun: str


def _write_lines(lines: Iterable[bytes], path: Path) -> int:
    count = 0
    with path.open("wb") as fh:
        for line in lines:
            fh.write(line)
            count += 1
    return count


def _suite_filter(options: dict[str, Any]) -> str | None:
    suite = options["suite"]
    if suite is not None and not TaskSuite.objects.filter(name=suite).exists():
        raise CommandError(f"no suite named {suite!r}")
    return suite


def _tasks(options: dict[str, Any]) -> Plan:
    suite = _suite_filter(options)
    tasks = Task.objects.all() if suite is None else Task.objects.filter(suite__name=suite)
    return Plan(iter_task_lines(tasks), _write_lines, tasks.count(), "task", "tasks")


def _trajectories(options: dict[str, Any]) -> Plan:
    suite = _suite_filter(options)
    qs = Trajectory.objects.all() if suite is None else Trajectory.objects.filter(suite__name=suite)
    if not options["include_unfinished"]:
        qs = finished_only(qs)
    return Plan(iter_trajectory_lines(qs), _write_lines, qs.count(), "traj", "trajectories")


def _preferences(options: dict[str, Any]) -> Plan:
    name = _required_set(options, "preferences")
    comparison_set = ComparisonSet.objects.filter(name=name).first()
    if comparison_set is None:
        raise CommandError(f"no comparison set named {name!r}")
    margin = not options["no_margin"]
    rows = iter_preference_rows(comparison_set, keep_ties=options["keep_ties"], margin=margin)
    if options["format"] == "parquet":

        def write(rows: Iterable[dict[str, Any]], path: Path) -> int:
            return write_parquet(rows, path, margin=margin)

        return Plan(rows, write, None, "pair", "preference pairs")
    return Plan(rows, write_jsonl, None, "pair", "preference pairs")


def _training_set(options: dict[str, Any]) -> Plan:
    """`--set NAME` is the newest version of the set; `--set NAME@VERSION` an older one."""
    given = _required_set(options, "training-set")
    try:
        training_set = find_training_set(given)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if training_set is None:
        raise CommandError(f"no training set {given!r}")
    total = len(training_set.trajectory_ids)
    return Plan(export_lines(training_set), _write_lines, total, "traj", "trajectories")


def _required_set(options: dict[str, Any], kind: str) -> str:
    if not options["set_name"]:
        raise CommandError(f"export {kind} needs --set NAME")
    return str(options["set_name"])


@dataclass(frozen=True)
class Kind:
    build: Callable[[dict[str, Any]], Plan]
    formats: tuple[str, ...]
    options: frozenset[str]  # the optional arguments that mean something for this kind


KINDS: dict[str, Kind] = {
    "tasks": Kind(_tasks, ("jsonl",), frozenset({"suite"})),
    "trajectories": Kind(_trajectories, ("jsonl",), frozenset({"suite", "include_unfinished"})),
    "preferences": Kind(_preferences, ("jsonl", "parquet"), frozenset({"set_name", "keep_ties", "no_margin"})),
    "training-set": Kind(_training_set, ("jsonl",), frozenset({"set_name"})),
}
# How each optional argument is spelled on the command line, for the error that refuses it.
FLAGS = {
    "suite": "--suite",
    "set_name": "--set",
    "include_unfinished": "--include-unfinished",
    "keep_ties": "--keep-ties",
    "no_margin": "--no-margin",
}


class Command(BaseCommand):
    help = (
        "Export tasks, trajectories, preference pairs (TRL format) or a training set, streaming; "
        "the output appears only when complete."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("what", choices=list(KINDS))
        parser.add_argument("--format", choices=["jsonl", "parquet"], default="jsonl")
        parser.add_argument("--out", type=Path, required=True)
        parser.add_argument("--suite", default=None, help="tasks, trajectories: only this suite")
        parser.add_argument(
            "--set", dest="set_name", default=None, help="preferences: comparison set; training-set: NAME[@VERSION]"
        )
        parser.add_argument(
            "--include-unfinished",
            action="store_true",
            help="trajectories: also queued, running, failed and cancelled ones",
        )
        parser.add_argument("--keep-ties", action="store_true", help="preferences: keep tie and both-bad verdicts")
        parser.add_argument("--no-margin", action="store_true", help="preferences: leave out the margin column")

    def handle(self, *args: Any, **options: Any) -> None:
        what = options["what"]
        kind = KINDS[what]
        if options["format"] not in kind.formats:
            raise CommandError(f"{what} export only as {' or '.join(kind.formats)}")
        # An option the kind ignores would be a filter the user believes was applied.
        for option, flag in FLAGS.items():
            if options[option] not in (None, False) and option not in kind.options:
                raise CommandError(f"{flag} does not apply to a {what} export")
        out: Path = options["out"]
        if not out.parent.is_dir():
            raise CommandError(f"{out.parent}: no such directory")
        plan = kind.build(options)
        # Written beside the target and renamed, so a crash never leaves half a file
        # under the name a pipeline will read.
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
        os.close(fd)
        try:
            with tqdm(
                total=plan.total,
                unit=plan.unit,
                desc="exporting",
                disable=options["verbosity"] == 0,
                file=self.stderr._out,
            ) as bar:
                count = plan.write(_counted(plan.rows, bar), Path(tmp))
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would surprise a pipeline
            os.replace(tmp, out)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.stdout.write(f"{count} {plan.noun} written to {out}")


def _counted(rows: Iterator[Any], bar: tqdm[Any]) -> Iterator[Any]:
    for row in rows:
        yield row
        bar.update(1)
