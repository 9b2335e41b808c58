from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.vocabulary import BackendName, values
from rewards.scoring import ScoringError, score_patch
from rewards.services import RewardError, calibration_cache, probe_secret, spec_from_option
from rewards.spec import SpecError
from sandbox import SandboxError
from tasks.models import Task
from tasks.services import TaskStoreError, task_spec_for, task_spec_from_dir
from tasks.spec import TaskSpec
from tasks.taskdir import TaskDirError


def task_spec_from(ref: str) -> TaskSpec:
    """A task id in the database, or a task directory on disk (scored from the store it is copied into)."""
    path = Path(ref)
    if path.is_dir():
        return task_spec_from_dir(path)
    try:
        return task_spec_for(Task.objects.get(task_id=ref))
    except Task.DoesNotExist:
        raise CommandError(f"no task {ref!r} in the database, and no task directory at that path") from None


class Command(BaseCommand):
    help = "Score a patch against a task's hidden tests in a fresh sandbox."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--task", required=True, help="task id, or a task directory")
        parser.add_argument("--patch", required=True, type=Path)
        parser.add_argument("--json", action="store_true")
        parser.add_argument(
            "--spec",
            default=None,
            help="reward spec YAML (default: CRUCIBLE_REWARD_SPEC, else rewards/default_spec.yaml)",
        )
        parser.add_argument(
            "--backend",
            choices=values(BackendName),
            default=settings.CRUCIBLE_SANDBOX_BACKEND,
            help="sandbox backend (default: CRUCIBLE_SANDBOX_BACKEND, %(default)s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        patch_path: Path = options["patch"]
        if not patch_path.is_file():
            raise CommandError(f"{patch_path}: no such file")
        try:
            patch = patch_path.read_text()
        except UnicodeDecodeError:
            raise CommandError(f"{patch_path}: not a UTF-8 text diff") from None
        try:
            spec = spec_from_option(options["spec"])
            task = task_spec_from(options["task"])
            if not task.fail_to_pass:
                raise CommandError(f"task {task.task_id} has no FAIL_TO_PASS tests to score against")
            score = score_patch(
                task, patch, spec, options["backend"], secret=probe_secret(), calibration_cache=calibration_cache()
            )
        except ScoringError as exc:
            # No verdict is not a verdict: said as such, in the form asked for, and never a reward.
            if options["json"]:
                self.stdout.write(json.dumps({"task_id": task.task_id, "error": str(exc)}))
            raise CommandError(str(exc)) from None
        except (TaskDirError, TaskStoreError, RewardError, SpecError, SandboxError) as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps(score.to_json()))
            return
        flags = ", ".join(sorted({f.detector for f in score.flags})) or "none"
        self.stdout.write(
            f"{score.task_id}: reward {score.reward:g} ({'resolved' if score.resolved else 'not resolved'}); "
            f"FAIL_TO_PASS {score.f2p_passed}/{score.f2p_total}, PASS_TO_PASS {score.p2p_passed}/{score.p2p_total}; "
            f"flags: {flags}; spec {score.spec_version}"
        )
