"""Demo logins and secret files: one password per user, private from creation, never logged."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django.test import override_settings

from core.env import ImproperlyConfiguredEnv, secret_file
from tasks.models import TaskSuite
from webapp.demo_checks import DEMO_SUITES

pytestmark = pytest.mark.django_db
RUN_SH = Path(__file__).resolve().parents[2] / "scripts" / "run.sh"


@pytest.fixture
def var(tmp_path: Path) -> Iterator[Path]:
    """A fresh var/ under a umask that leaves new files world-readable, and no chmod allowed:
    a secret that is not created private cannot end up private here."""
    old_umask = os.umask(0)

    def no_chmod(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"chmod {args[:2]}: secrets must be created private, not chmod-ed later")

    with pytest.MonkeyPatch.context() as patch, override_settings(VAR_DIR=tmp_path):
        patch.setattr(os, "chmod", no_chmod)
        patch.setattr(Path, "chmod", no_chmod)
        try:
            yield tmp_path
        finally:
            os.umask(old_umask)


def seed() -> str:
    # The demo suites already there: only the logins are set up (importing them takes seconds).
    for name in DEMO_SUITES:
        TaskSuite.objects.get_or_create(name=name)
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def private(path: Path) -> bool:
    mode = path.lstat().st_mode
    return stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o600


def test_each_demo_user_gets_its_own_password_kept_in_private_files(var: Path) -> None:
    first = seed()
    admin_password = (var / "admin_password").read_text().strip()
    demo = dict(line.split(" ") for line in (var / "demo_passwords").read_text().splitlines())
    assert private(var / "admin_password") and private(var / "demo_passwords")
    assert sorted(demo) == ["researcher", "reviewer"]
    passwords = {admin_password, demo["reviewer"], demo["researcher"]}
    assert len(passwords) == 3 and all(len(p) >= 16 for p in passwords)
    assert authenticate(username="admin", password=admin_password)
    for name, role in (("reviewer", "reviewer"), ("researcher", "researcher")):
        user = authenticate(username=name, password=demo[name])
        assert user is not None and user.groups.filter(name=role).exists()
        assert authenticate(username=name, password=admin_password) is None
    # The admin's login is shown once, on the first set-up; afterwards only where it is kept.
    assert f"login: admin / {admin_password}" in first
    again = seed()
    assert not any(p in again for p in passwords)
    assert str(var / "admin_password") in again and str(var / "demo_passwords") in again
    assert (var / "admin_password").read_text().strip() == admin_password  # written once
    assert sorted(p.name for p in var.iterdir()) == ["admin_password", "demo_passwords"]


def test_demo_users_of_an_old_install_lose_the_shared_admin_password(var: Path) -> None:
    shared = "the-old-shared-password"
    for name, password in (("admin", shared), ("reviewer", shared), ("researcher", "chosen-by-herself")):
        user = User.objects.create_user(name, password=password)
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    fd = os.open(var / "admin_password", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, shared.encode())
    os.close(fd)
    output = seed()
    assert shared not in output
    assert authenticate(username="admin", password=shared)  # the admin's own password stays
    demo = dict(line.split(" ") for line in (var / "demo_passwords").read_text().splitlines())
    assert authenticate(username="reviewer", password=shared) is None
    assert authenticate(username="reviewer", password=demo["reviewer"])
    # A password someone chose is theirs to keep.
    assert authenticate(username="researcher", password="chosen-by-herself")


def test_a_secret_file_is_private_from_creation_and_a_planted_link_is_refused(var: Path) -> None:
    key = secret_file(var / "secret_key", lambda: "k" * 60)
    assert key == "k" * 60 and private(var / "secret_key")
    assert secret_file(var / "secret_key", lambda: "other") == key  # made once, then read
    (var / "elsewhere").write_text("not yours")
    (var / "linked").symlink_to(var / "elsewhere")
    with pytest.raises(ImproperlyConfiguredEnv, match="cannot read"):
        secret_file(var / "linked", lambda: "x")
    os.umask(0o022)
    loose = var / "loose"
    loose.write_text("readable by all")
    with pytest.raises(ImproperlyConfiguredEnv, match="readable by others"):
        secret_file(loose, lambda: "x")


def test_a_world_readable_password_file_stops_the_seeding_with_a_clear_error(var: Path) -> None:
    (var / "admin_password").write_text("visible")
    with pytest.raises(CommandError, match="admin_password is readable by others"):
        seed()
    assert not User.objects.filter(username="admin").exists()


def test_make_run_keeps_no_copy_of_the_seeding_output() -> None:
    # The first run's output holds the admin's password: it goes to the terminal only.
    script = RUN_SH.read_text()
    seeding = [line for line in script.splitlines() if "seed_demo" in line and not line.startswith("#")]
    assert seeding == ["$BIN/python manage.py seed_demo"]
