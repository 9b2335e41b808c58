"""The checkpoint page's evaluation parts: each evaluation of the checkpoint with its pass@k."""

from __future__ import annotations

from typing import Any

from evaluation.queries import eval_runs
from training.checkpoint_sections import CheckpointSection, Slot, register_checkpoint_section
from training.models import Checkpoint

EVALS_SHOWN = 50


def checkpoint_evals(checkpoint: Checkpoint) -> dict[str, Any]:
    rows = []
    for run in eval_runs().filter(checkpoint=checkpoint).order_by("-created_at", "-id")[:EVALS_SHOWN]:
        # results come from the scorer's report: only numbers are shown, whatever else is there.
        pass_at_k = run.results.get("pass_at_k") if isinstance(run.results, dict) else None
        values = pass_at_k if isinstance(pass_at_k, dict) else {}
        rows.append({"run": run, "pass_at_k": [(k, values.get(str(k))) for k in run.k_values]})
    return {"checkpoint_evals": rows}


def register() -> None:
    register_checkpoint_section(
        CheckpointSection(
            key="evaluation",
            templates={
                Slot.LINEAGE: "evaluation/_checkpoint_lineage.html",
                Slot.BODY: "evaluation/_checkpoint_evals.html",
            },
            load=checkpoint_evals,
        )
    )
