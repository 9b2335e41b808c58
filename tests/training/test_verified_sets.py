"""Training sets are chosen by rewards Crucible computed under a named spec, never by what a file claims."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from annotation.models import FlagClearance, flag_key
from annotation.services import AnnotationError, clear_flags
from rewards.models import Reward
from rewards.services import score_trajectory
from tasks.models import Task
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from tests.factories import TrajectoryFactory
from tests.training.helpers import SPEC, record_score
from training.curation import CurationError, CurationRule, build_training_set, select
from training.models import TrainingSet
from trajectories.models import Trajectory
from trajectories.services import import_trajectories

pytestmark = pytest.mark.django_db

MINING = {"detector": "git_history_mining", "evidence": "git log -p origin/main", "step": 3}


@pytest.fixture
def demo_task(db: None) -> Task:
    import_task_dirs(DEMO / "tasks" / "task_0001", "demo")
    return Task.objects.get(task_id="task_0001")


def import_claiming_success(tmp_path: Path, patch: str) -> Trajectory:
    """An imported trajectory that says it solved task_0001: final_reward 1.0, success true, no flags."""
    trajectory_id = str(uuid.uuid4())
    record = {
        "task_id": "task_0001",
        "trajectory_id": trajectory_id,
        "patch": patch,
        "final_reward": 1.0,
        "success": True,
        "flags": [],
        "termination": "submitted",
        "steps": [{"step": 1, "action_type": "submit", "action_input": ""}],
    }
    path = tmp_path / f"{trajectory_id}.jsonl"
    path.write_text(json.dumps(record) + "\n")
    import_trajectories(path)
    return Trajectory.objects.get(trajectory_id=trajectory_id)


def scored_clean(task: str = "clean") -> Trajectory:
    trajectory = TrajectoryFactory.create(task_ref=task, final_reward=None, success=None)
    record_score(trajectory, 1.0, True)
    return trajectory


def chosen_ids(rule: CurationRule) -> set[str]:
    return {str(c.trajectory_id) for c in select(rule).chosen}


def test_an_imported_trajectory_claiming_success_enters_a_verified_set_only_once_crucible_scored_it(
    tmp_path: Path, demo_task: Task
) -> None:
    honest = import_claiming_success(tmp_path, demo_task.expected_patch)
    cheat = import_claiming_success(tmp_path, "")  # claims the same, changes nothing
    for rule in (CurationRule(successes_only=True), CurationRule()):
        with pytest.raises(CurationError, match="2 matching trajectories have no reward yet"):
            build_training_set("claims", rule)
    assert chosen_ids(CurationRule(query={"success": "true"})) == set()  # the list's filter sees no claim either
    assert not TrainingSet.objects.exists()

    assert score_trajectory(str(honest.trajectory_id)).reward == 1.0  # a real bwrap run of the hidden tests
    cheated = score_trajectory(str(cheat.trajectory_id))
    assert cheated.reward <= 0 and not cheated.resolved

    wins = build_training_set("wins", CurationRule(successes_only=True))
    assert wins.trajectory_ids == [str(honest.trajectory_id)]
    assert wins.rule["spec_version"] == SPEC.version and wins.stats["verified"] is True
    everything = build_training_set("all", CurationRule())
    assert set(everything.trajectory_ids) == {str(honest.trajectory_id), str(cheat.trajectory_id)}
    assert everything.stats["successes"] == 1  # the cheat is a verified failure, whatever it claimed
    cheat.refresh_from_db()
    assert cheat.claimed == {"final_reward": 1.0, "success": True, "flags": []} and cheat.success is False


def test_a_review_flag_keeps_a_trajectory_out_until_a_reviewer_clears_it(reviewer: User) -> None:
    clean = scored_clean()
    flagged = TrajectoryFactory.create(task_ref="mined", final_reward=None, success=None)
    record_score(flagged, 1.0, True, flags=[MINING])
    assert SPEC.policy("git_history_mining") == "review"
    selection = select(CurationRule(successes_only=True))
    assert [c.trajectory_id for c in selection.chosen] == [clean.trajectory_id] and selection.awaiting_review == 1
    with pytest.raises(CurationError, match="1 wait for a reviewer"):
        build_training_set("mined", CurationRule(query={"task": "mined"}))

    clearing = clear_flags(reviewer, flagged, [flag_key(MINING)], "reads its own repository's log, not the fix")
    assert chosen_ids(CurationRule(successes_only=True)) == {str(clean.trajectory_id), str(flagged.trajectory_id)}
    recorded = FlagClearance.objects.get()
    assert recorded == clearing and recorded.reviewer == reviewer and recorded.trajectory == flagged
    assert recorded.flags == [MINING] and recorded.spec_version == SPEC.version
    assert recorded.reason == "reads its own repository's log, not the fix" and recorded.created_at is not None


def test_only_flags_with_the_review_policy_wait_for_a_reviewer() -> None:
    timed_out = TrajectoryFactory.create(task_ref="slow", final_reward=None, success=None)
    record_score(timed_out, 0.0, False, flags=[{"detector": "timeout", "evidence": "ran past 120 s"}])
    unknown = TrajectoryFactory.create(task_ref="odd", final_reward=None, success=None)
    record_score(unknown, 1.0, True, flags=[{"detector": "from_a_future_release", "evidence": "?"}])
    assert SPEC.policy("timeout") == "zero"
    # A zero-policy flag already took the reward: the trajectory is a verified failure, kept as one.
    # A detector the spec does not know is treated as needing a person.
    selection = select(CurationRule())
    assert [c.trajectory_id for c in selection.chosen] == [timed_out.trajectory_id] and selection.awaiting_review == 1


def test_a_clearing_covers_only_the_evidence_the_reviewer_saw(reviewer: User) -> None:
    flagged = TrajectoryFactory.create(final_reward=None, success=None)
    record_score(flagged, 1.0, True, flags=[MINING])
    clear_flags(reviewer, flagged, [flag_key(MINING)], "looked at it")
    assert chosen_ids(CurationRule()) == {str(flagged.trajectory_id)}
    # Scored again, the trajectory carries other evidence of the same detector: nobody cleared that.
    other = {**MINING, "evidence": "git show HEAD~1:src/config.py", "step": 7}
    Reward.objects.filter(trajectory=flagged).update(flags=[other])
    Trajectory.objects.filter(pk=flagged.pk).update(flags=[other])
    assert chosen_ids(CurationRule()) == set()
    with pytest.raises(AnnotationError, match="changed since the page was loaded"):
        clear_flags(reviewer, flagged, [flag_key(MINING)], "the old evidence again")
    assert FlagClearance.objects.count() == 1


def test_rewards_under_another_spec_do_not_count_and_the_rule_names_its_spec() -> None:
    older = TrajectoryFactory.create(final_reward=None, success=None)
    record_score(older, 1.0, True, spec_version="guide-default@000000000000")
    selection = select(CurationRule())
    assert selection.chosen == [] and selection.unscored == 1 and selection.spec_version == SPEC.version
    with pytest.raises(CurationError, match="names reward spec guide-default@000000000000"):
        select(CurationRule(spec_version="guide-default@000000000000"))
    assert select(CurationRule(spec_version=SPEC.version)).unscored == 1


def test_a_verified_set_exports_and_shows_the_rewards_of_the_spec_that_chose_it(reviewer_client: Client) -> None:
    winner = scored_clean()
    build_training_set("wins", CurationRule(successes_only=True))
    # Scored again later under another spec: the trajectory's own outcome moves, the set's does not.
    record_score(winner, 0.0, False, spec_version="stricter@111111111111")
    export = reviewer_client.get("/training/sets/wins/1/export/")
    (line,) = [json.loads(row) for row in b"".join(export.streaming_content).splitlines()]  # type: ignore[attr-defined]
    assert (line["final_reward"], line["success"], line["flags"]) == (1.0, True, [])
    assert "claimed" not in line  # Crucible made this one: there is no claim to keep
    page = reviewer_client.get("/training/sets/wins/1/").content.decode()
    assert "verified</span> chosen by rewards Crucible computed under reward spec" in page and SPEC.version in page
    assert '<span class="badge ok">success</span>' in page
    TrainingSet.objects.create(name="legacy", version=1, rule={"successes_only": True}, trajectory_ids=[])
    assert "not verified</span> frozen before" in reviewer_client.get("/training/sets/legacy/1/").content.decode()
    assert "not verified" in reviewer_client.get("/training/sets/").content.decode()
