"""What an imported file says about its own outcome is a claim: stored, exported and shown as one."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from tests.factories import TrajectoryFactory
from tests.training.helpers import SPEC, record_score
from trajectories.models import Trajectory
from trajectories.services import import_trajectories

CLAIM = {"final_reward": 1.0, "success": True, "flags": []}


def write_jsonl(path: Path, *records: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def record(**fields: Any) -> dict[str, Any]:
    return {"task_id": "task_0001", "trajectory_id": str(uuid.uuid4()), **fields}


def exported(tmp_path: Path) -> dict[str, dict[str, Any]]:
    out = tmp_path / "export.jsonl"
    call_command("export", "trajectories", "--out", str(out), verbosity=0)
    return {line["trajectory_id"]: line for line in map(json.loads, out.read_text().splitlines())}


@pytest.mark.django_db
def test_an_imported_outcome_is_stored_as_claimed_and_never_as_the_verified_one(tmp_path: Path) -> None:
    mined = {"detector": "git_history_mining", "evidence": "git log"}
    claims_success = record(**CLAIM, patch="")
    claims_nothing = record()
    our_export = record(final_reward=None, success=None, flags=[], claimed={**CLAIM, "flags": [mined]})
    both = record(final_reward=0.5, success=False, claimed=CLAIM)  # the record's own outcome is the claim
    import_trajectories(
        write_jsonl(tmp_path / "in.jsonl", claims_success, claims_nothing, our_export, both), allow_unknown_tasks=True
    )

    stored = {str(t.trajectory_id): t for t in Trajectory.objects.all()}
    for trajectory in stored.values():
        assert (trajectory.final_reward, trajectory.success, trajectory.flags) == (None, None, [])
        assert trajectory.scored_at is None and trajectory.scored_spec == "" and not trajectory.is_scored
    assert stored[claims_success["trajectory_id"]].claimed == CLAIM
    assert stored[claims_nothing["trajectory_id"]].claimed == {}
    assert stored[our_export["trajectory_id"]].claimed == {**CLAIM, "flags": [mined]}
    assert stored[both["trajectory_id"]].claimed == {"final_reward": 0.5, "success": False, "flags": []}
    assert all(t.extra == {} for t in stored.values())  # `claimed` is the schema's, not an unknown key
    claiming_success = Trajectory.objects.filter(claimed__success=True).values_list("trajectory_id", flat=True)
    assert {str(t) for t in claiming_success} == {claims_success["trajectory_id"], our_export["trajectory_id"]}

    lines = exported(tmp_path)
    for line in lines.values():
        assert (line["final_reward"], line["success"], line["flags"]) == (None, None, [])
    assert lines[claims_success["trajectory_id"]]["claimed"] == CLAIM
    assert "claimed" not in lines[claims_nothing["trajectory_id"]]  # only when there is a claim


@pytest.mark.django_db
def test_a_scored_import_exports_its_verified_outcome_beside_its_claim(tmp_path: Path) -> None:
    claim = record(**CLAIM, patch="")
    import_trajectories(write_jsonl(tmp_path / "in.jsonl", claim), allow_unknown_tasks=True)
    trajectory = Trajectory.objects.get()
    record_score(trajectory, -1.0, False, flags=[{"detector": "forged_test_run", "evidence": "a canary passed"}])
    line = exported(tmp_path)[claim["trajectory_id"]]
    assert (line["final_reward"], line["success"]) == (-1.0, False) and line["claimed"] == CLAIM
    assert line["flags"] == [{"detector": "forged_test_run", "evidence": "a canary passed"}]

    # In another store, what this one verified is only a claim: nothing arrives verified.
    Trajectory.objects.all().delete()
    import_trajectories(write_jsonl(tmp_path / "again.jsonl", line), allow_unknown_tasks=True)
    again = Trajectory.objects.get()
    assert (again.final_reward, again.success, again.flags, again.scored_at) == (None, None, [], None)
    assert again.claimed == {"final_reward": -1.0, "success": False, "flags": line["flags"]}


@pytest.mark.django_db
def test_the_pages_show_what_was_claimed_apart_from_what_was_verified(tmp_path: Path, reviewer_client: Client) -> None:
    claim = record(**CLAIM, patch="", task_id="elsewhere")
    import_trajectories(write_jsonl(tmp_path / "in.jsonl", claim), allow_unknown_tasks=True)
    trajectory = Trajectory.objects.get()
    detail_url = f"/trajectories/{trajectory.trajectory_id}/"
    listing = reviewer_client.get("/trajectories/").content.decode()
    assert "Verified reward" in listing and "claimed 1.000</small>" in listing and "claimed success</small>" in listing
    page = reviewer_client.get(detail_url).content.decode()
    assert 'id="claimed-outcome"' in page and "claimed, not verified" in page
    assert "not scored by Crucible yet" in page and ">verified</span>" not in page

    record_score(trajectory, 0.0, False)
    page = reviewer_client.get(detail_url).content.decode()
    assert f'title="computed by Crucible under {SPEC.version}' in page and ">verified</span>" in page
    assert 'id="claimed-outcome"' in page  # the claim stays on show beside the verdict
    listing = reviewer_client.get("/trajectories/?success=true").content.decode()
    assert "No trajectories match." in listing  # the list's filters read the verified outcome


def _executor() -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    return executor


BEFORE = [("trajectories", "0005_trainingset_moves_to_training"), ("rewards", "0001_initial")]


@pytest.mark.django_db(transaction=True)
def test_outcomes_stored_before_the_split_become_claims_unless_crucible_scored_them() -> None:
    latest = _executor().loader.graph.leaf_nodes()
    executor = _executor()
    try:
        executor.migrate(BEFORE)
        old = executor.loader.project_state(BEFORE).apps
        OldTrajectory = old.get_model("trajectories", "Trajectory")
        common = {"task_ref": "t", "created_at": TrajectoryFactory.build().created_at}
        imported = OldTrajectory.objects.create(
            trajectory_id=uuid.uuid4(), final_reward=1.0, success=True, flags=[], **common
        )
        scored = OldTrajectory.objects.create(
            trajectory_id=uuid.uuid4(), final_reward=0.0, success=False, flags=[{"detector": "timeout"}], **common
        )
        untouched = OldTrajectory.objects.create(trajectory_id=uuid.uuid4(), **common)
        reward = old.get_model("rewards", "Reward").objects.create(
            trajectory=scored, spec_version="guide-default@abc", reward=0.0, resolved=False, pass_rate=0.0
        )
    finally:
        # Whatever happened above, later tests need the schema as it is today.
        _executor().migrate(latest)

    now_imported = Trajectory.objects.get(pk=imported.pk)
    assert now_imported.claimed == CLAIM and (now_imported.final_reward, now_imported.success) == (None, None)
    assert now_imported.scored_at is None
    now_scored = Trajectory.objects.get(pk=scored.pk)
    assert (now_scored.final_reward, now_scored.success, now_scored.flags) == (0.0, False, [{"detector": "timeout"}])
    assert now_scored.claimed == {} and now_scored.scored_spec == "guide-default@abc"
    assert now_scored.scored_at == reward.created_at
    now_untouched = Trajectory.objects.get(pk=untouched.pk)
    assert now_untouched.claimed == {} and now_untouched.scored_at is None
