from __future__ import annotations

from pathlib import Path

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Crucible core"

    def ready(self) -> None:
        from django.conf import settings

        from core import redaction

        # core.redaction is plain Python (a trainer may use it): settings reach it from here.
        patterns = settings.CRUCIBLE_REDACTION_PATTERNS
        redaction.configure(settings.CRUCIBLE_REDACTION_HOST_SUFFIXES, Path(patterns) if patterns else None)
