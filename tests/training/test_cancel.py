"""Cancel stops a run's whole process tree; a killed worker leaves its run failed and resumable."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from subprocess import Popen

import psutil
import pytest
from django.contrib.auth.models import User

from core.vocabulary import RunStatus
from tests.conftest import client_for, start_worker
from tests.training.runs import config, read_config, status_of, verified_set, wait_for
from training.models import TrainingRun
from training.services import create_run

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@contextmanager
def training_worker() -> Iterator[Popen[bytes]]:
    worker = start_worker("training")
    proc = next(worker)
    try:
        yield proc
    finally:
        for _ in worker:
            pass


def group_members(pgid: int) -> list[psutil.Process]:
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def running_group(run: TrainingRun, size: int) -> int:
    """The run's process group once the trainer and its child are both up."""
    wait_for(lambda: TrainingRun.objects.get(pk=run.pk).pgid is not None, 60, "the trainer to start")
    pgid = TrainingRun.objects.get(pk=run.pk).pgid
    assert pgid is not None
    wait_for(lambda: len(group_members(pgid)) >= size, 30, "the trainer's child process")
    return pgid


def test_cancelling_a_running_job_stops_its_whole_process_tree(
    researcher: User, fake_trainer: Callable[..., None]
) -> None:
    verified_set()
    fake_trainer("slow", step_s=2)
    with training_worker():
        run = create_run(config("sft", rl={"max_steps": 100}), researcher)
        pgid = running_group(run, size=2)
        wait_for(lambda: run.metric_rows.exists(), 30, "a first metric")
        response = client_for(researcher).post(f"/training/{run.pk}/cancel/")
        assert response.status_code == 302
        assert group_members(pgid) == []  # the trainer and its child, not only the leader
        run.refresh_from_db()
        assert run.status == RunStatus.CANCELLED and run.error == f"cancelled by {researcher.username}"
        page = client_for(researcher).get(f"/training/{run.pk}/").content.decode()
        assert "cancelled by rita-researcher" in page
        # The job ends without overwriting the person's word, and keeps the log for the page.
        wait_for(lambda: TrainingRun.objects.get(pk=run.pk).pgid is None, 30, "the job to let go of the run")
        assert status_of(run) == RunStatus.CANCELLED and "step 1 done" in TrainingRun.objects.get(pk=run.pk).log_tail
        again = client_for(researcher).post(f"/training/{run.pk}/cancel/", follow=True)
        assert f"run {run.pk} is already cancelled" in again.content.decode()


def test_a_killed_worker_leaves_its_run_failed_and_resumable_from_the_last_checkpoint(
    researcher: User, fake_trainer: Callable[..., None]
) -> None:
    verified_set()
    fake_trainer("hang")
    client = client_for(researcher)
    with training_worker() as worker:
        run = create_run(config("sft", rl={"max_steps": 3}), researcher)
        pgid = running_group(run, size=2)
        wait_for(lambda: run.checkpoints.exists(), 30, "the first checkpoint")
        worker.kill()
        worker.wait()
        assert status_of(run) == RunStatus.RUNNING  # nobody has looked yet
        page = client.get(f"/training/{run.pk}/").content.decode()
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and "resumable from its last checkpoint" in run.error
    assert "Resume from the last checkpoint" in page
    assert group_members(pgid) == []  # the orphaned trainer does not train on for nobody

    fake_trainer("ok")
    with training_worker():
        assert client.post(f"/training/{run.pk}/resume/").status_code == 302
        wait_for(lambda: status_of(run) in (RunStatus.SUCCEEDED, RunStatus.FAILED), 60, "the resumed run to end")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.log_tail
    first = run.checkpoints.get(step=1)
    assert run.resume_from == first
    trainer_config = read_config(run)
    assert trainer_config["model"]["base_model"] == first.path and trainer_config["rl"]["max_steps"] == 3
    assert trainer_config["resume"] == {"checkpoint_id": first.pk, "step": 1}
    assert list(run.metric_rows.values_list("step", flat=True)) == [1, 2, 3]  # steps run on after the checkpoint
    last = run.checkpoints.get(step=3)
    assert last.parent == first
