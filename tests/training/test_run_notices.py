"""The run page says what the curves leave unsaid: GRPO groups with nothing to learn from, clipped generations."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from tests.conftest import client_for
from training.models import RunMetric, TrainingRun

pytestmark = pytest.mark.django_db


def grpo_run(*values: dict[str, float]) -> TrainingRun:
    run = TrainingRun.objects.create(kind="grpo", status="running", config={"rl": {"max_new_tokens": 64}})
    for step, logged in enumerate(values, start=1):
        RunMetric.objects.create(run=run, step=step, values=logged)
    return run


def notices_on(researcher: User, run: TrainingRun) -> str:
    response = client_for(researcher).get(reverse("training:run", args=[run.pk]))
    assert response.status_code == 200
    page = response.content.decode()
    start = page.find('id="run-notices"')
    return "" if start < 0 else page[start : page.index("</section>", start)]


def test_a_grpo_run_whose_groups_had_no_reward_variance_for_three_logged_steps_says_so(researcher: User) -> None:
    flat = grpo_run(
        {"reward_std": 0.4, "clipped_ratio": 0.0},
        *({"reward_std": 0.0, "clipped_ratio": 1.0} for _ in range(3)),
    )
    said = notices_on(researcher, flat)
    assert "reward_std was 0 for 3 consecutive logged steps (steps 2–4)" in said
    assert "Raise rl.num_generations or rl.temperature" in said
    assert "100% of the latest step&#x27;s generations reached rl.max_new_tokens (64)" in said
    # Variance that came back, or a flat stretch shorter than three logged steps, is not called flat.
    recovered = grpo_run({"reward_std": 0.0}, {"reward_std": 0.0}, {"reward_std": 0.2}, {"reward_std": 0.0})
    assert "reward_std was 0" not in notices_on(researcher, recovered)
