"""Runs launched from the API, the launch form and the `train` command; checkpoints listed."""

from __future__ import annotations

import json
from collections.abc import Callable
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from core.vocabulary import RunStatus
from tests.conftest import client_for, start_worker
from tests.training.runs import config, verified_set, wait_for
from training.management.commands.train import training_worker_available
from training.models import TrainingRun


def api(user: User) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_api_launches_a_run_and_answers_a_bad_config_field_by_field(
    researcher: User, reviewer: User, fake_trainer: Callable[..., None]
) -> None:
    verified_set()
    client = api(researcher)
    bad = client.post("/api/v1/training-runs/", {"config": {"kind": "grpo", "rl": {"batch_size": 3}}}, format="json")
    assert bad.status_code == 400
    assert set(bad.json()["errors"]) >= {"model.base_model", "data.training_set", "rl.batch_size"}
    assert TrainingRun.objects.count() == 0
    assert api(reviewer).post("/api/v1/training-runs/", {"config": config()}, format="json").status_code == 403

    created = client.post("/api/v1/training-runs/", {"config": yaml.safe_dump(config())}, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["status"] == "queued" and body["kind"] == "sft" and body["dataset"] == "oracle@1"
    run = TrainingRun.objects.get(pk=body["id"])
    assert run.created_by == researcher
    listed = client.get("/api/v1/training-runs/?kind=sft").json()["results"]
    assert [r["id"] for r in listed] == [run.pk]
    assert client.get("/api/v1/checkpoints/").json()["results"] == []
    cancelled = client.post(f"/api/v1/training-runs/{run.pk}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert client.post(f"/api/v1/training-runs/{run.pk}/resume/").status_code == 409


@pytest.mark.django_db
def test_the_launch_form_shows_each_error_and_launches_a_valid_config(
    researcher: User, reviewer: User, fake_trainer: Callable[..., None]
) -> None:
    verified_set()
    client = client_for(researcher)
    page = client.get("/training/").content.decode()
    assert "kind: sft" in page and 'id="config-examples"' in page
    bad = client.post("/training/", {"config": "kind: sft\nrl:\n  learning_rate: 7\n"})
    assert bad.status_code == 400
    text = bad.content.decode()
    assert "rl.learning_rate" in text and "missing data set" in text and "model.base_model" in text
    ok = client.post("/training/", {"config": yaml.safe_dump(config())})
    run = TrainingRun.objects.get()
    assert ok.status_code == 302 and ok["Location"] == f"/training/{run.pk}/"
    assert client_for(reviewer).post("/training/", {"config": yaml.safe_dump(config())}).status_code == 403
    assert TrainingRun.objects.count() == 1


@pytest.mark.django_db
def test_train_wait_json_runs_inline_without_a_worker_and_exits_non_zero_unless_it_succeeded(
    tmp_path: Path, fake_trainer: Callable[..., None]
) -> None:
    verified_set()
    path = tmp_path / "rl_config.yaml"
    path.write_text(yaml.safe_dump(config()))
    out = StringIO()
    call_command("train", "--config", str(path), "--wait", "--json", stdout=out, stderr=StringIO())
    result = json.loads(out.getvalue())
    run = TrainingRun.objects.get(pk=result["run_id"])
    assert result["status"] == "succeeded" and result["metrics"]["loss"] == pytest.approx(2 / 3)
    assert result["checkpoint"] == {"id": run.checkpoints.get(step=3).pk, "path": run.checkpoints.get(step=3).path}

    fake_trainer("fail")
    out = StringIO()
    with pytest.raises(CommandError, match="failed: trainer exited with code 3"):
        call_command("train", "--config", str(path), "--wait", "--json", stdout=out, stderr=StringIO())
    assert json.loads(out.getvalue())["status"] == "failed"
    path.write_text("kind: sft\n")
    with pytest.raises(CommandError, match=r"bad config .*model.base_model: is missing"):
        call_command("train", "--config", str(path))
    with pytest.raises(CommandError, match="cannot read config"):
        call_command("train", "--config", str(tmp_path / "missing.yaml"))


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_train_wait_goes_through_a_training_worker_when_one_answers(
    tmp_path: Path, fake_trainer: Callable[..., None]
) -> None:
    verified_set()
    path = tmp_path / "rl_config.json"
    path.write_text(json.dumps(config()))
    worker = start_worker("training")
    proc = next(worker)
    try:
        wait_for(training_worker_available, 60, "the worker to answer")
        out = StringIO()
        call_command("train", "--config", str(path), "--wait", "--json", stdout=out, stderr=StringIO())
    finally:
        for _ in worker:
            pass
    result = json.loads(out.getvalue())
    run = TrainingRun.objects.get(pk=result["run_id"])
    assert result["status"] == RunStatus.SUCCEEDED
    assert run.worker.endswith(f":{proc.pid}")  # the worker ran it, not this process
