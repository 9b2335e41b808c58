from __future__ import annotations

from django.apps import AppConfig


class RewardsConfig(AppConfig):
    name = "rewards"

    def ready(self) -> None:
        # Lower layers cannot import rewards; they learn of it here, once the apps are loaded.
        from rewards import receivers, suite_columns, sweeps, trajectory_sections

        receivers.connect()
        sweeps.connect()
        suite_columns.register()
        trajectory_sections.register()
