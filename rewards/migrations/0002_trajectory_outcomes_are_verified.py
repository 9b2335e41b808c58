"""A trajectory's final_reward, success and flags become the reward service's alone.

Trajectories the reward service scored keep their outcome and learn which spec computed it
(the latest Reward). Every other outcome came from an imported file, so it is a claim: it
moves to `claimed` and the outcome is emptied, which is what keeps an imported "success"
out of verified training sets.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

BATCH = 1000


def split_claims_from_verified(apps: Any, schema_editor: Any) -> None:
    Trajectory = apps.get_model("trajectories", "Trajectory")
    Reward = apps.get_model("rewards", "Reward")
    latest: dict[int, tuple[str, Any]] = {}
    for trajectory_id, spec_version, created_at in (
        Reward.objects.order_by("trajectory_id", "created_at", "id")
        .values_list("trajectory_id", "spec_version", "created_at")
        .iterator(chunk_size=BATCH)
    ):
        latest[trajectory_id] = (spec_version, created_at)
    changed = []
    for row in Trajectory.objects.only("pk", "final_reward", "success", "flags").iterator(chunk_size=BATCH):
        if row.pk in latest:
            row.scored_spec, row.scored_at = latest[row.pk]
        elif row.final_reward is not None or row.success is not None or row.flags:
            row.claimed = {"final_reward": row.final_reward, "success": row.success, "flags": row.flags or []}
            row.final_reward, row.success, row.flags = None, None, []
        else:
            continue
        changed.append(row)
        if len(changed) >= BATCH:
            Trajectory.objects.bulk_update(
                changed, ["final_reward", "success", "flags", "claimed", "scored_spec", "scored_at"]
            )
            changed = []
    if changed:
        Trajectory.objects.bulk_update(
            changed, ["final_reward", "success", "flags", "claimed", "scored_spec", "scored_at"]
        )


def claims_back_into_the_outcome(apps: Any, schema_editor: Any) -> None:
    Trajectory = apps.get_model("trajectories", "Trajectory")
    changed = []
    # Only the fields it moves: the other apps' later migrations may be unapplied already.
    rows = Trajectory.objects.filter(scored_at=None).only("pk", "claimed", "final_reward", "success", "flags")
    for row in rows.iterator(chunk_size=BATCH):
        claim = row.claimed
        if not claim:
            continue
        row.final_reward, row.success, row.flags = (
            claim.get("final_reward"),
            claim.get("success"),
            claim.get("flags") or [],
        )
        changed.append(row)
    for start in range(0, len(changed), BATCH):
        Trajectory.objects.bulk_update(changed[start : start + BATCH], ["final_reward", "success", "flags"])


class Migration(migrations.Migration):
    dependencies = [
        ("rewards", "0001_initial"),
        ("trajectories", "0006_trajectory_claimed_and_scored"),
    ]

    operations = [migrations.RunPython(split_claims_from_verified, claims_back_into_the_outcome)]
