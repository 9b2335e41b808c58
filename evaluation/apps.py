from __future__ import annotations

from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"

    def ready(self) -> None:
        from core.sweep import register
        from evaluation import checkpoint_sections, during_training
        from evaluation.services import refresh_running_evals

        register("evaluations", refresh_running_evals)
        # The checkpoint page (training's) lists the evaluations of the checkpoint.
        checkpoint_sections.register()
        # Runs that ask for it have their checkpoints evaluated as they are saved.
        during_training.register()
