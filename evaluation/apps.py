from __future__ import annotations

from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"

    def ready(self) -> None:
        from core.sweep import register
        from evaluation.services import refresh_running_evals

        register("evaluations", refresh_running_evals)
