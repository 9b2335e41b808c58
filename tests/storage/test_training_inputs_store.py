"""A training run created on the web host runs on a GPU host that shares no disk with it: the training
data travels through the object store, checked against the hash recorded when it was written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pytest_django import Settings

from core.storage import object_store
from core.vocabulary import RunStatus
from tests.storage.conftest import S3Server
from tests.training.runs import config, fake_trainer, verified_set  # noqa: F401 - fixture
from training.launcher import execute
from training.models import TrainingRun
from training.services import RunError, create_run, run_dir, run_inputs_key, stage_run_inputs

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hosts(settings: Settings, s3_server: S3Server, bucket_url: str, tmp_path: Path) -> Path:
    settings.CRUCIBLE_STORAGE_URL = bucket_url
    settings.CRUCIBLE_S3_ENDPOINT_URL = s3_server.endpoint
    settings.VAR_DIR = tmp_path / "web-host"
    return tmp_path


def test_a_run_created_on_the_web_host_trains_on_a_gpu_host_without_its_disk(
    settings: Settings,
    hosts: Path,
    fake_trainer: Callable[..., None],  # noqa: F811
) -> None:
    verified_set()
    run = create_run(config("sft"), enqueue=False)
    web_train = run_dir(run) / "train.jsonl"
    assert object_store().get_bytes(run_inputs_key(run)) == web_train.read_bytes()

    settings.VAR_DIR = hosts / "gpu-host"  # the training worker: its own var/, nothing shared
    finished = execute(run.pk)

    assert finished is not None and finished.status == RunStatus.SUCCEEDED, finished and finished.log_tail
    staged = run_dir(run)
    assert staged.is_relative_to(hosts / "gpu-host")
    assert (staged / "train.jsonl").read_bytes() == web_train.read_bytes()
    trainer_config = json.loads((staged / "config.json").read_text())
    assert trainer_config["data"]["train_file"] == str(staged / "train.jsonl")
    assert trainer_config["output_dir"] == str(staged / "output") == TrainingRun.objects.get(pk=run.pk).output_dir
    assert all(Path(c.path).is_relative_to(staged) for c in finished.checkpoints.all())


def test_tampered_training_data_is_refused_and_nothing_is_left(settings: Settings, hosts: Path) -> None:
    verified_set()
    run = create_run(config("sft"), enqueue=False)
    object_store().put_bytes(run_inputs_key(run), b'{"messages": [{"role": "user", "content": "planted"}]}\n')
    settings.VAR_DIR = hosts / "gpu-host"
    with pytest.raises(RunError, match="does not match its recorded hash"):
        stage_run_inputs(run)
    assert not (run_dir(run) / "train.jsonl").exists() and not (run_dir(run) / "config.json").exists()
    finished = execute(run.pk)
    assert finished is not None and finished.status == RunStatus.FAILED
    assert "does not match" in finished.error


def test_without_an_object_store_a_missing_run_directory_is_named(settings: Settings, tmp_path: Path) -> None:
    settings.CRUCIBLE_STORAGE_URL = ""
    settings.VAR_DIR = tmp_path / "web"
    verified_set()
    run = create_run(config("sft"), enqueue=False)
    assert stage_run_inputs(run) == run_dir(run)  # the same host: its own directory, as before
    settings.VAR_DIR = tmp_path / "elsewhere"
    with pytest.raises(RunError, match="no object store is configured"):
        stage_run_inputs(run)
