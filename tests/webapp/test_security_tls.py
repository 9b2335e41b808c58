"""CRUCIBLE_TLS=1 turns on what a deployment behind TLS needs, and `check --deploy` is then clean."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

SETTINGS = Path(__file__).resolve().parents[2] / "webapp" / "settings.py"
TLS_NAMES = (
    "SECURE_PROXY_SSL_HEADER",
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SILENCED_SYSTEM_CHECKS",
)


def production_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **env: str) -> dict[str, Any]:
    """webapp/settings.py evaluated afresh under this environment, as a deployment loads it."""
    for name, value in {"CRUCIBLE_VAR_DIR": str(tmp_path), "DEBUG": "0", **env}.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS))


def deploy_check(values: dict[str, Any]) -> None:
    """`manage.py check --deploy`, failing on warnings too, with the security settings given."""
    with override_settings(DEBUG=False, **{k: v for k, v in values.items() if k in TLS_NAMES}):
        call_command("check", "--deploy", "--tag", "security", "--fail-level", "WARNING", verbosity=0)


def test_tls_settings_come_from_the_environment_and_pass_the_deploy_check(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CRUCIBLE_TLS", raising=False)
    plain = production_settings(monkeypatch, tmp_path)
    # Plain http on loopback (`make run`): the check names what a deployment would miss.
    with pytest.raises(SystemCheckError) as missing:
        deploy_check(plain)
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in str(missing.value)

    tls = production_settings(monkeypatch, tmp_path, CRUCIBLE_TLS="1")
    assert tls["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")
    assert tls["SECURE_SSL_REDIRECT"] and tls["SESSION_COOKIE_SECURE"] and tls["CSRF_COOKIE_SECURE"]
    assert tls["SECURE_HSTS_SECONDS"] == 31536000 and tls["SECURE_HSTS_INCLUDE_SUBDOMAINS"]
    deploy_check(tls)
    # Preloading is the domain owner's call; chosen, it is set and nothing is silenced.
    preload = production_settings(monkeypatch, tmp_path, CRUCIBLE_TLS="1", CRUCIBLE_HSTS_PRELOAD="1")
    assert preload["SECURE_HSTS_PRELOAD"] and "SILENCED_SYSTEM_CHECKS" not in preload
    deploy_check(preload)
