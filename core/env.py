"""Typed readers for settings from the environment.

Each fails loudly on a value it cannot read, so a typo in a deployment shows up at
start-up rather than as odd behaviour later (healthchecks' `envbool` / `envint`).
"""

from __future__ import annotations

import os


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
