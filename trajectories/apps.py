from __future__ import annotations

from django.apps import AppConfig


class TrajectoriesConfig(AppConfig):
    name = "trajectories"

    def ready(self) -> None:
        from trajectories import sweeps

        sweeps.connect()
