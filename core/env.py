"""Typed readers for settings from the environment.

Each fails loudly on a value it cannot read, so a typo in a deployment shows up at
start-up rather than as odd behaviour later (healthchecks' `envbool` / `envint`).
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path


class ImproperlyConfiguredEnv(ValueError):
    pass


def envstr(name: str, default: str) -> str:
    return os.environ.get(name, default)


def envbool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfiguredEnv(f"{name}={raw!r} is not a boolean (use true/false)")


def envint(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfiguredEnv(f"{name}={raw!r} is not an integer") from None


def envfloat(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfiguredEnv(f"{name}={raw!r} is not a number") from None


def envlist(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def envchoice(name: str, default: str, allowed: tuple[str, ...]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip()
    if value not in allowed:
        raise ImproperlyConfiguredEnv(f"{name}={raw!r} is not one of {', '.join(allowed)}")
    return value


def secret_file(path: Path, make: Callable[[], str]) -> str:
    """The secret kept in `path`, made by `make()` and written there the first time.

    The file is private from the first byte: it is created with mode 0600 (O_CREAT|O_EXCL),
    never written world-readable and chmod-ed afterwards, which leaves a window in which
    another local user can open it. Its content appears under the final name all at once
    (a hard link to a finished private file), so a web server and a worker starting together
    both read the same complete value; a link planted in its place is refused.
    """
    if not path.exists() and not path.is_symlink():
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(make())
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass  # another process won the race; its value is the one everybody uses
        finally:
            tmp.unlink(missing_ok=True)
    return read_private(path).strip()


def read_private(path: Path) -> str:
    """A secret file's text; refused when it is a link or others may read it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ImproperlyConfiguredEnv(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, encoding="utf-8") as src:
        mode = os.fstat(src.fileno()).st_mode
        if mode & 0o077:
            raise ImproperlyConfiguredEnv(f"{path} is readable by others (mode {mode & 0o777:o}); chmod 600 it")
        return src.read()


INSTANCE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


def instance_name(given: str, database: dict[str, object]) -> str:
    """The name that keeps this deployment's jobs, results and live groups apart on a shared Redis.

    Given (CRUCIBLE_INSTANCE), it must be a short plain word. By default it is derived from the
    database: two checkouts with their own databases (two SQLite files, two PostgreSQL databases)
    get two names, and every process of one deployment (web, workers, commands), sharing its
    database, gets the same one.
    """
    if given:
        if not INSTANCE_RE.match(given):
            raise ImproperlyConfiguredEnv(
                f"CRUCIBLE_INSTANCE={given!r} must be 1-40 letters, digits, '_', '.' or '-', "
                "starting with a letter or digit"
            )
        return given
    where = "|".join(str(database.get(key) or "") for key in ("ENGINE", "HOST", "PORT", "NAME"))
    return "crucible-" + hashlib.sha256(where.encode()).hexdigest()[:10]
