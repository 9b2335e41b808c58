from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from core.env import ImproperlyConfiguredEnv, secret_file
from core.roles import ADMIN, RESEARCHER, REVIEWER
from rewards.jobs import score_trajectory_job
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from trajectories.models import Trajectory
from trajectories.services import import_trajectories
from webapp.demo_checks import ADVERSARIAL_SUITE, DEMO_SUITE, GO_SUITE, JS_SUITE

DEMO_DIR = Path(settings.BASE_DIR) / "demo"
ADMIN_PASSWORD_FILE = "admin_password"  # noqa: S105 - a file name, not a password
DEMO_PASSWORDS_FILE = "demo_passwords"
DEMO_USERS = {"reviewer": REVIEWER, "researcher": RESEARCHER}
# The Go and JavaScript suites (docs/languages.md): loaded like the others, validated by verify_demo.
LANGUAGE_SUITES = {GO_SUITE: "go_tasks", JS_SUITE: "js_tasks"}


class Command(BaseCommand):
    help = "Load the demo suite and trajectories once, and make sure the admin and demo logins exist."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        try:
            admin_password = ensure_logins(username)
        except ImproperlyConfiguredEnv as exc:
            raise CommandError(str(exc)) from None
        if not TaskSuite.objects.filter(name=DEMO_SUITE).exists():
            result = import_task_dirs(DEMO_DIR / "tasks", DEMO_SUITE, "train")
            self.stdout.write(f"demo suite: {result.created} tasks")
            traj = import_trajectories(DEMO_DIR / "trajectories.jsonl")
            self.stdout.write(f"demo trajectories: {traj.created}")
            # What the demo files say about their outcomes is only claimed; the reward service's
            # scores (once a worker runs) are what the pages set beside them, e.g. the parse_config
            # example, which claims no success, and the reward hack, which claims one it lacks.
            demo = Trajectory.objects.filter(suite__name=DEMO_SUITE).values_list("trajectory_id", flat=True)
            ids = [str(t) for t in demo]
            transaction.on_commit(lambda: [score_trajectory_job.delay(i) for i in ids])
        if not TaskSuite.objects.filter(name=ADVERSARIAL_SUITE).exists():
            # Adversarial traps (docs/formats.md): their passes (or flags) give each policy's cheat rate.
            result = import_task_dirs(DEMO_DIR / "adversarial", ADVERSARIAL_SUITE, "adversarial")
            self.stdout.write(f"adversarial suite: {result.created} tasks")
        seeded = []
        for suite, folder in LANGUAGE_SUITES.items():
            if not TaskSuite.objects.filter(name=suite).exists():
                result = import_task_dirs(DEMO_DIR / folder, suite, "train")
                self.stdout.write(f"{suite} suite: {result.created} tasks")
                seeded.append(suite)
        if len(seeded) == len(LANGUAGE_SUITES):  # their trajectories name tasks of both
            self._language_trajectories(seeded)
        var = Path(settings.VAR_DIR)
        if admin_password is not None:
            # Shown once, on the terminal of the first set-up; after that only where it is kept.
            self.stdout.write(f"login: {username} / {admin_password}")
        self.stdout.write(
            f"passwords (readable only by you): {username} in {var / ADMIN_PASSWORD_FILE}, "
            f"{' and '.join(DEMO_USERS)} in {var / DEMO_PASSWORDS_FILE}"
        )

    def _language_trajectories(self, suites: list[str]) -> None:
        """The Go and JavaScript suites' recorded trajectories (demo/lang_trajectories.jsonl), scored
        by the reward service once a worker runs, as the Python demo's are."""
        traj = import_trajectories(DEMO_DIR / "lang_trajectories.jsonl")
        self.stdout.write(f"Go and JavaScript demo trajectories: {traj.created}")
        stored = Trajectory.objects.filter(suite__name__in=suites).values_list("trajectory_id", flat=True)
        ids = [str(t) for t in stored]
        transaction.on_commit(lambda: [score_trajectory_job.delay(i) for i in ids])


def new_password() -> str:
    return secrets.token_urlsafe(12)


def ensure_logins(username: str) -> str | None:
    """Create the admin and the demo reviewer and researcher once, each with its own password.

    The passwords are kept in var/, in files only this user can read (core.env.secret_file);
    nothing else records them. Returns the admin's password when the admin was created now
    (the first set-up), else None.
    """
    var = Path(settings.VAR_DIR)
    admin_password = secret_file(var / ADMIN_PASSWORD_FILE, new_password)
    demo_path = var / DEMO_PASSWORDS_FILE
    # Before this file existed every demo user had the admin's password: a demo user found still
    # holding it when the file is new gets the password the file now holds.
    demo_file_is_new = not demo_path.exists()
    demo_passwords = read_demo_passwords(
        demo_path, secret_file(demo_path, lambda: "".join(f"{n} {new_password()}\n" for n in DEMO_USERS))
    )
    with transaction.atomic():
        admin_created = _ensure_user(username, ADMIN, admin_password)
        for name, role in DEMO_USERS.items():
            _ensure_user(name, role, demo_passwords[name], replacing=admin_password if demo_file_is_new else None)
    return admin_password if admin_created else None


def read_demo_passwords(path: Path, text: str) -> dict[str, str]:
    found = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
    missing = [name for name in DEMO_USERS if not found.get(name, "").strip()]
    if missing:
        raise CommandError(f"{path} has no password for {', '.join(missing)}; remove the file to make new ones")
    return {name: found[name].strip() for name in DEMO_USERS}


def _ensure_user(name: str, role: str, password: str, *, replacing: str | None = None) -> bool:
    """The user, created with `password` if missing; an existing one keeps its own password
    unless it is still `replacing`."""
    user, created = User.objects.get_or_create(
        username=name, defaults={"is_staff": role == ADMIN, "is_superuser": role == ADMIN}
    )
    if created or (replacing is not None and user.check_password(replacing)):
        user.set_password(password)
        user.save(update_fields=["password"])
    # get_or_create: the roles migration made the groups, but a flushed test database lacks them.
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    return created
