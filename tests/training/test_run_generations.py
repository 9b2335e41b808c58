"""A GRPO run's generations are filed under the run: its page links them, the trajectory list
does not mix them with rollouts and imports unless asked for them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tests.conftest import client_for
from tests.factories import TrajectoryFactory
from training.models import TrainingRun

pytestmark = pytest.mark.django_db


def test_a_grpo_runs_generations_are_listed_under_it_and_not_among_the_rollouts(researcher: User) -> None:
    run = TrainingRun.objects.create(name="grpo-run", kind="grpo", config={}, created_by=researcher)
    other = TrainingRun.objects.create(name="grpo-other", kind="grpo", config={}, created_by=researcher)
    rollout = TrajectoryFactory.create()
    generated = [TrajectoryFactory.create(extra={"training_run": run.pk, "step": n}) for n in (1, 2)]
    elsewhere = TrajectoryFactory.create(extra={"training_run": other.pk, "step": 1})
    client = client_for(researcher)

    listed = client.get("/trajectories/").context["trajectories"]
    assert [t.pk for t in listed] == [rollout.pk]
    under_run = client.get(f"/trajectories/?training_run={run.pk}").context["trajectories"]
    assert sorted(t.pk for t in under_run) == sorted(t.pk for t in generated)
    assert elsewhere.pk not in {t.pk for t in under_run}
    assert client.get("/trajectories/?training_run=x").status_code == 200  # a bad value filters to nothing

    page = client.get(f"/training/{run.pk}/").content.decode()
    assert f'href="/trajectories/?training_run={run.pk}" id="run-generations"' in page
    sft = TrainingRun.objects.create(name="sft-run", kind="sft", config={}, created_by=researcher)
    assert 'id="run-generations"' not in client.get(f"/training/{sft.pk}/").content.decode()
