from __future__ import annotations

from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "training"

    def ready(self) -> None:
        from core.sweep import register
        from training import hooks
        from training.services import lost_training_runs

        hooks.connect()
        register("training", lost_training_runs)
