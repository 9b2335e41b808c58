from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from celery import current_app
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.vocabulary import JobQueue
from training.config import ConfigError
from training.launcher import execute
from training.models import TrainingRun
from training.services import FINISHED, RunError, create_run, fail_lost_runs, last_checkpoint

POLL_SECONDS = 1.0


def training_worker_available(timeout: float = 1.0) -> bool:
    """Whether some Celery worker consumes the `training` queue right now."""
    try:
        replies = current_app.control.inspect(timeout=timeout).active_queues() or {}
    except OSError:
        return False
    return any(q.get("name") == JobQueue.TRAINING for queues in replies.values() for q in queues or [])


def summary(run: TrainingRun) -> dict[str, Any]:
    checkpoint = last_checkpoint(run)
    return {
        "run_id": run.pk,
        "status": run.status,
        "checkpoint": {"id": checkpoint.pk, "path": checkpoint.path} if checkpoint else None,
        "metrics": run.metrics,
    }


class Command(BaseCommand):
    help = (
        "Launch a training run from an rl_config (YAML or JSON: kind, model, environment, rl, data, logging). "
        "Without --wait it is queued for a worker on the `training` queue; with --wait it runs on such a "
        "worker when one answers, else here, and the command ends with the run."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--config", required=True, type=Path, help="rl_config.yaml or .json")
        parser.add_argument("--wait", action="store_true", help="wait for the run to end")
        parser.add_argument("--json", action="store_true", help="with --wait: print the result as one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["config"]
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read config {path}: {exc}") from None
        wait = options["wait"]
        on_worker = training_worker_available() if wait else True
        try:
            run = create_run(text, enqueue=on_worker)
        except (ConfigError, RunError) as exc:
            raise CommandError(f"bad config {path}: {exc}") from None
        if not wait:
            self.stdout.write(f"training run {run.pk} queued ({run.kind}); a worker on the `training` queue runs it")
            return
        if on_worker:
            run = self._wait(run)
        else:
            self.stderr.write(f"no worker consumes the `training` queue: running run {run.pk} here")
            execute(run.pk)
            run.refresh_from_db()
        if options["json"]:
            self.stdout.write(json.dumps(summary(run)))
        else:
            self.stdout.write(f"training run {run.pk}: {run.status}")
        if run.status != TrainingRun.Status.SUCCEEDED:
            raise CommandError(f"training run {run.pk} {run.status}: {run.error or 'see its log tail'}")

    def _wait(self, run: TrainingRun) -> TrainingRun:
        while True:
            fail_lost_runs(TrainingRun.objects.filter(pk=run.pk))
            run.refresh_from_db()
            if run.status in FINISHED:
                return run
            time.sleep(POLL_SECONDS)
