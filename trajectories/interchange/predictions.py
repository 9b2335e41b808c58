"""SWE-bench predictions: what the official harness (`swebench.harness.run_evaluation
--predictions_path`) reads, one JSON object per line."""

from __future__ import annotations

from typing import Any


def prediction(trajectory: dict[str, Any], model_name: str | None = None) -> dict[str, Any]:
    """From a trajectory record. The harness keys predictions by instance_id (the last one wins), so
    an export meant for it should hold one run: filter by batch or suite."""
    policy = trajectory.get("policy") or {}
    name = model_name or policy.get("model") or policy.get("kind") or "crucible"
    return {
        "instance_id": trajectory["task_id"],
        "model_name_or_path": name,
        "model_patch": trajectory.get("patch") or "",
        # Not read by the harness; lets a result be traced back to the trajectory.
        "trajectory_id": trajectory["trajectory_id"],
    }
