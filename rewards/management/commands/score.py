from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from rewards.bulk import IMPORTED, JOBS_MAX, ScoringRunError, run_scoring_run, start_scoring_run
from rewards.models import ScoringRun
from tasks.models import TaskSuite
from trajectories.models import RolloutBatch


class Command(BaseCommand):
    help = (
        "Verify trajectories: score them through the reward service (claimed rewards of imported files "
        "become verified ones). Idempotent per (trajectory, reward spec version): a second run adds nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--batch", type=int, help="the trajectories of one rollout batch")
        which.add_argument("--suite", help="the trajectories of one suite")
        which.add_argument("--imported", action="store_true", help="every imported trajectory")
        parser.add_argument("--spec", type=Path, default=None, help="reward spec YAML (default: the active spec)")
        parser.add_argument("--jobs", type=int, default=1, help=f"trajectories scored side by side (1-{JOBS_MAX})")
        parser.add_argument("--json", action="store_true", help="print the run's counts as one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["jobs"] <= JOBS_MAX:
            raise CommandError(f"--jobs must be between 1 and {JOBS_MAX}")
        filters: dict[str, Any] = {}
        if options["batch"] is not None:
            if not RolloutBatch.objects.filter(pk=options["batch"]).exists():
                raise CommandError(f"no batch {options['batch']}")
            filters["batch"] = options["batch"]
        elif options["suite"] is not None:
            if not TaskSuite.objects.filter(name=options["suite"]).exists():
                raise CommandError(f"no suite named {options['suite']!r}")
            filters["suite"] = options["suite"]
        else:
            filters[IMPORTED] = True
        spec_text = ""
        if options["spec"] is not None:
            try:
                spec_text = options["spec"].read_text()
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"{options['spec']}: {exc}") from None
        try:
            run = start_scoring_run(filters, spec_text, enqueue=False)
        except ScoringRunError as exc:
            raise CommandError(str(exc)) from None
        quiet = options["verbosity"] == 0 or options["json"]
        with tqdm(
            total=run.total, unit="traj", desc=f"scoring run {run.pk}", disable=quiet, file=self.stderr._out
        ) as bar:

            def progress(current: ScoringRun) -> None:
                bar.update(current.done - bar.n)
                bar.set_postfix(scored=current.scored, already=current.skipped, failed=current.failed, refresh=False)

            done = run_scoring_run(run.pk, jobs=options["jobs"], on_progress=progress)
        if done is None:
            raise CommandError(f"scoring run {run.pk} was taken over by another worker; see its row for the result")
        if done.status != ScoringRun.Status.SUCCEEDED:
            raise CommandError(f"scoring run {run.pk} failed: {done.error}")
        summary = {
            "run_id": done.pk,
            "spec_version": done.spec_version,
            "total": done.total,
            "scored": done.scored,
            "skipped": done.skipped,
            "failed": done.failed,
        }
        if options["json"]:
            self.stdout.write(json.dumps(summary))
            return
        self.stdout.write(
            f"scoring run {done.pk} under {done.spec_version}: {done.scored} scored, "
            f"{done.skipped} already scored, {done.failed} could not be scored, of {done.total}"
        )
        if done.failed:
            self.stdout.write("the trajectories that could not be scored say why on their pages")
