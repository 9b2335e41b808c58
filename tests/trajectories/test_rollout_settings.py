"""RolloutSettings: the one value the form, the API, both commands, batches and evaluations share."""

from __future__ import annotations

import dataclasses

import pytest

from core.limits import MAX_NEW_TOKENS_DEFAULT, MAX_STEPS_DEFAULT, TEMPERATURE_DEFAULT, TOP_P_DEFAULT
from evaluation.services import EvalError, eval_settings
from tests.trajectories.test_rollouts import small_suite
from trajectories.batch_views import LaunchForm
from trajectories.batches import start_batch
from trajectories.models import RolloutBatch
from trajectories.rollout_settings import RolloutError, RolloutSettings


def test_every_setting_is_a_batch_column_with_the_same_default() -> None:
    columns = {field.name: field for field in RolloutBatch._meta.get_fields() if hasattr(field, "default")}
    for field in dataclasses.fields(RolloutSettings):
        if field.name in {"policy_kind", "model", "base_url"}:
            assert field.name in columns
            continue
        assert columns[field.name].default == field.default, field.name
    assert (TEMPERATURE_DEFAULT, TOP_P_DEFAULT, MAX_STEPS_DEFAULT, MAX_NEW_TOKENS_DEFAULT) == (
        RolloutSettings("scripted").temperature,
        RolloutSettings("scripted").top_p,
        RolloutSettings("scripted").max_steps,
        RolloutSettings("scripted").max_new_tokens,
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"samples": True}, "must be numbers"),
        ({"samples": "3"}, "must be numbers"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"max_steps": 10_000}, "max steps"),
        ({"sandbox": "local"}, "sandbox must be"),
        ({"model": "m" * 301}, "at most 300"),
    ],
)
def test_a_value_that_exists_is_one_a_batch_may_be_made_from(changes: dict[str, object], message: str) -> None:
    with pytest.raises(RolloutError, match=message):
        RolloutSettings("scripted", **changes)  # type: ignore[arg-type]
    with pytest.raises(RolloutError, match=message):
        RolloutSettings("scripted").replace(**changes)


def test_the_command_and_the_form_build_the_same_settings() -> None:
    command: dict[str, object] = {
        "policy": "scripted",
        "model": "",
        "base_url": "",
        "samples": 2,
        "temperature": 0.5,
        "top_p": 1.0,
    }
    command |= {"max_steps": 7, "max_new_tokens": 256, "sandbox": "bwrap", "seed": 0, "score_timeout": 900.0}
    form: dict[str, object] = {
        "suite": None,
        "policy": "scripted",
        "model": "",
        "base_url": "",
        "samples": 2,
        "temperature": 0.5,
    }
    form |= {"max_steps": 7, "sandbox": "bwrap", "tasks": []}
    assert RolloutSettings.from_options(command) == RolloutSettings.from_options(form)
    assert RolloutSettings.from_options(form) == RolloutSettings("scripted", samples=2, temperature=0.5, max_steps=7)


@pytest.mark.django_db
def test_a_batch_row_reads_back_as_the_settings_it_was_made_from() -> None:
    wanted = RolloutSettings("scripted", samples=2, temperature=0.3, top_p=0.9, max_steps=5, seed=11)
    batch = start_batch(small_suite(), wanted, enqueue=False)
    assert RolloutSettings.of_batch(batch) == wanted.resolved() == wanted.replace(model="oracle")


@pytest.mark.django_db
def test_the_launch_form_refuses_what_the_value_refuses() -> None:
    small_suite()
    form = LaunchForm(
        {"suite": "small", "policy": "scripted", "samples": 1, "temperature": 0.8, "max_steps": 3, "sandbox": "bwrap"}
    )
    assert form.is_valid(), form.errors
    assert form.cleaned_data["rollout"] == RolloutSettings("scripted", max_steps=3)


def test_an_evaluation_samples_the_largest_k_unless_told() -> None:
    assert eval_settings({"policy": "scripted"}, [1, 5]).samples == 5
    assert eval_settings({"policy": "scripted", "samples": 8}, [1, 5]).samples == 8
    with pytest.raises(EvalError, match="at least the largest k"):
        eval_settings({"policy": "scripted", "samples": 2}, [1, 5])
    with pytest.raises(EvalError, match="policy must be"):
        eval_settings({"policy": "nope"}, [1])
