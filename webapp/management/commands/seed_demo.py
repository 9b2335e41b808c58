from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from core.roles import ADMIN, RESEARCHER, REVIEWER
from rewards.jobs import score_trajectory_job
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from trajectories.models import Trajectory
from trajectories.services import import_trajectories

DEMO_DIR = Path(settings.BASE_DIR) / "demo"


class Command(BaseCommand):
    help = "Load the demo suite and trajectories once, and make sure an admin login exists."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        password = ensure_admin(username)
        if not TaskSuite.objects.filter(name="demo").exists():
            result = import_task_dirs(DEMO_DIR / "tasks", "demo", "train")
            self.stdout.write(f"demo suite: {result.created} tasks")
            traj = import_trajectories(DEMO_DIR / "trajectories.jsonl")
            self.stdout.write(f"demo trajectories: {traj.created}")
            # What the demo files say about their outcomes is only claimed; the reward service's
            # scores (once a worker runs) are what the pages set beside them, e.g. the guide's
            # example, which claims no success, and the reward hack, which claims one it lacks.
            demo = Trajectory.objects.filter(suite__name="demo").values_list("trajectory_id", flat=True)
            ids = [str(t) for t in demo]
            transaction.on_commit(lambda: [score_trajectory_job.delay(i) for i in ids])
        if not TaskSuite.objects.filter(name="demo-adversarial").exists():
            # Seed §7.2: traps whose passes (or flags) give each policy's cheat rate.
            result = import_task_dirs(DEMO_DIR / "adversarial", "demo-adversarial", "adversarial")
            self.stdout.write(f"adversarial suite: {result.created} tasks")
        self.stdout.write(f"login: {username} / {password}")


def ensure_admin(username: str) -> str:
    """Create the admin (and demo reviewer/researcher) once; the password lives in var/."""
    path = Path(settings.VAR_DIR) / "admin_password"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_text(secrets.token_urlsafe(12))
        tmp.chmod(0o600)
        tmp.replace(path)
    password = path.read_text().strip()
    with transaction.atomic():
        for name, role in ((username, ADMIN), ("reviewer", REVIEWER), ("researcher", RESEARCHER)):
            user, created = User.objects.get_or_create(
                username=name, defaults={"is_staff": role == ADMIN, "is_superuser": role == ADMIN}
            )
            if created:
                user.set_password(password)
                user.save(update_fields=["password"])
            user.groups.add(Group.objects.get(name=role))
    return password
