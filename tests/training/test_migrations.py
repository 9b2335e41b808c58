"""TrainingSet moved from trajectories to training without losing a row."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, connection
from django.db.migrations.executor import MigrationExecutor

from training.models import TrainingSet

BEFORE_THE_MOVE = [("trajectories", "0004_trajectory_replay_report")]


def _executor() -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    return executor


@pytest.mark.django_db(transaction=True)
def test_a_training_set_made_before_the_move_is_still_there_after_it() -> None:
    latest = _executor().loader.graph.leaf_nodes()
    content_type_pk = ContentType.objects.get_for_model(TrainingSet).pk
    executor = _executor()
    try:
        executor.migrate(BEFORE_THE_MOVE)
        old = executor.loader.project_state(BEFORE_THE_MOVE).apps
        author = old.get_model("auth", "User").objects.create(username="early-researcher")
        old.get_model("trajectories", "TrainingSet").objects.create(
            name="legacy",
            version=3,
            rule={"successes_only": True},
            trajectory_ids=["t-1", "t-2"],
            stats={"trajectories": 2},
            created_by=author,
        )
    finally:
        # Whatever happened above, later tests need the schema as it is today.
        _executor().migrate(latest)
    ContentType.objects.clear_cache()

    moved = TrainingSet.objects.select_related("created_by").get(name="legacy")
    assert (moved.version, moved.trajectory_ids, moved.rule) == (3, ["t-1", "t-2"], {"successes_only": True})
    assert moved.created_by is not None and moved.created_by.username == "early-researcher"
    assert TrainingSet._meta.db_table == "training_trainingset"
    # Permissions and admin history hang on the content type: it moved with the model.
    assert ContentType.objects.get_for_model(TrainingSet).pk == content_type_pk
    assert not ContentType.objects.filter(app_label="trajectories", model="trainingset").exists()
    # The unique version constraint came along too.
    with pytest.raises(IntegrityError):
        TrainingSet.objects.create(name="legacy", version=3)
