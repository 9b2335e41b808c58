"""Dashboard: throughput is per hour of rollout time, training steps per minute, over time."""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.conftest import client_for
from tests.evaluation.helpers import small_suite
from training.models import RunMetric, TrainingRun
from trajectories.models import RolloutBatch, Trajectory
from webapp.queries import rollout_metrics, timeline


@pytest.mark.django_db
def test_throughput_counts_only_the_hours_rollouts_ran_and_charts_them_by_hour(reviewer: User) -> None:
    suite = small_suite()
    now = timezone.now()
    hour_start = now.replace(minute=0, second=0, microsecond=0)
    # One batch that ran for 30 minutes three hours ago and finished 45 trajectories.
    started = hour_start - timedelta(hours=3)
    batch = RolloutBatch.objects.create(suite=suite, policy_kind="scripted", status="succeeded")
    RolloutBatch.objects.filter(pk=batch.pk).update(started_at=started, finished_at=started + timedelta(minutes=30))
    for i in range(45):
        Trajectory.objects.create(
            trajectory_id=uuid.uuid4(),
            batch=batch,
            sample_index=i,
            task_ref="task_0001",
            status="finished",
            created_at=started,
            heartbeat_at=started + timedelta(seconds=30 + i * 30),
            sandbox={"backend": "bwrap", "startup_ms": 8.0 + i % 2 * 4},
        )
    run = TrainingRun.objects.create(kind="sft")
    logged = hour_start - timedelta(hours=2)
    for i, step in enumerate([0, 10, 20, 40]):
        row = RunMetric.objects.create(run=run, step=step, values={"loss": 1.0})
        RunMetric.objects.filter(pk=row.pk).update(logged_at=logged + timedelta(minutes=i))

    metrics = rollout_metrics()
    assert metrics["finished"] == 45 and metrics["running_hours"] == 0.5 and metrics["running_minutes"] == 30.0
    assert metrics["per_hour"] == 90.0  # not 45 / 24 = 1.9: idle hours do not count
    assert metrics["training"] == pytest.approx(40 / 3, abs=0.01)
    assert metrics["startup_ms"] == pytest.approx(9.96, abs=0.05)

    series = timeline()
    hours = series["hour"]
    assert len(hours) == 24
    at = hours.index(started.isoformat())
    assert series["per_hour"][at] == 90.0 and series["startup_ms"][at] == pytest.approx(9.96, abs=0.05)
    assert series["steps_per_minute"][hours.index(logged.isoformat())] == pytest.approx(13.33, abs=0.01)
    assert series["per_hour"][at + 1] is None  # nothing ran then

    html = client_for(reviewer).get("/").content.decode()
    assert 'id="per-hour">90.0<' in html and 'id="steps-per-minute">13.33<' in html
    match = re.search(r'<script id="dashboard-timeline" type="application/json">(.*?)</script>', html, re.S)
    assert match and json.loads(match.group(1))["per_hour"][at] == 90.0
    assert "js/evaluation_dashboard.js" in html and 'id="chart-sampling"' in html
