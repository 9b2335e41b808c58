"""Why a queued row waits: its queue's length and consumers, read from the tests' real Redis."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from pytest_django import Settings

from core.queue_waits import (
    CONSUMER_FRESH_S,
    consumers_key,
    forget_consumer,
    queue_list_keys,
    queue_wait,
    record_consumer,
)
from core.vocabulary import JobQueue
from evaluation.models import EvalRun
from tasks.models import TaskSuite, ValidationRun
from tests.conftest import client_for
from training.models import TrainingRun
from trajectories.models import RolloutBatch

PREFIX = settings.REDIS_KEY_PREFIX


@pytest.fixture
def researcher_client(researcher: User) -> Client:
    return client_for(researcher)


@pytest.fixture
def broker() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)

    def clear() -> None:
        keys = [key for queue in JobQueue for key in (*queue_list_keys(queue, PREFIX), consumers_key(queue, PREFIX))]
        client.delete(*keys)

    clear()
    yield client
    clear()
    client.close()


def test_it_counts_the_messages_of_every_priority_list_of_the_queue(broker: redis.Redis) -> None:
    base, *priorities = queue_list_keys(JobQueue.TRAINING, PREFIX)
    assert base == f"{PREFIX}training" and priorities[0] == f"{PREFIX}training\x06\x163"
    broker.lpush(base, b'{"fake": 1}', b'{"fake": 2}')
    broker.lpush(priorities[-1], b'{"fake": 3}')
    # Another queue's jobs and another instance's jobs are not this queue's.
    broker.lpush(f"{PREFIX}rollouts", b"{}")
    broker.lpush(f"someone-else:{JobQueue.TRAINING}", b"{}")
    try:
        wait = queue_wait(JobQueue.TRAINING)
    finally:
        broker.delete(f"someone-else:{JobQueue.TRAINING}")
    assert (wait.queue, wait.jobs_waiting, wait.consumers) == ("training", 3, 0)
    assert wait.unconsumed and not wait.unknown


def test_a_worker_counts_while_its_beat_is_fresh_and_not_once_it_withdraws(broker: redis.Redis) -> None:
    now = time.time()
    record_consumer(broker, ["rollouts", "rewards"], "rollouts@host", PREFIX, now=now)
    record_consumer(broker, ["training"], "dead@host", PREFIX, now=now - CONSUMER_FRESH_S - 1)
    assert queue_wait(JobQueue.ROLLOUTS).consumers == 1
    assert queue_wait(JobQueue.REWARDS).consumers == 1
    assert queue_wait(JobQueue.TRAINING).consumers == 0
    forget_consumer(broker, ["rollouts", "rewards"], "rollouts@host", PREFIX)
    assert queue_wait(JobQueue.ROLLOUTS).unconsumed


def test_a_broker_that_does_not_answer_makes_the_wait_unknown(settings: Settings) -> None:
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    wait = queue_wait(JobQueue.DEFAULT)
    assert wait.unknown and wait.jobs_waiting is None and not wait.unconsumed


def test_a_queued_training_run_says_what_it_waits_for(broker: redis.Redis, researcher_client: Client) -> None:
    run = TrainingRun.objects.create(kind="sft", name="<script>alert(1)</script>")
    broker.lpush(f"{PREFIX}training", b"{}", b"{}")
    page = researcher_client.get(reverse("training:run", args=[run.pk])).content.decode()
    assert "queued on <code>training</code>:\n2 jobs waiting there;" in page
    assert "no worker is consuming <code>training</code>" in page
    assert "celery -A webapp worker -Q training" in page
    assert "<script>alert(1)" not in page


def test_a_queued_training_run_with_a_worker_on_its_queue_says_so(
    broker: redis.Redis, researcher_client: Client
) -> None:
    run = TrainingRun.objects.create(kind="sft")
    record_consumer(broker, ["training"], "training@host", PREFIX)
    page = researcher_client.get(reverse("training:run", args=[run.pk])).content.decode()
    assert "0 jobs waiting there;\n1 worker consuming it" in page and "no worker is consuming" not in page


def test_a_running_training_run_shows_no_queue_wait(broker: redis.Redis, researcher_client: Client) -> None:
    run = TrainingRun.objects.create(kind="sft", status="running")
    assert 'id="queue-wait"' not in researcher_client.get(reverse("training:run", args=[run.pk])).content.decode()


def test_queued_batches_evaluations_and_validations_name_their_queue(
    broker: redis.Redis, researcher_client: Client, demo_suite: TaskSuite
) -> None:
    batch = RolloutBatch.objects.create(suite=demo_suite, policy_kind="scripted")
    evaluation = EvalRun.objects.create(
        suite=demo_suite,
        policy_kind="scripted",
        batch=batch,
        samples=1,
        k_values=[1],
        temperature=0.0,
        status="running",
    )
    validation = ValidationRun.objects.create(suite=demo_suite)
    broker.lpush(f"{PREFIX}rollouts", b"{}")
    pages = [
        ("rollouts", reverse("batches:detail", args=[batch.pk])),
        ("rollouts", reverse("evaluation:detail", args=[evaluation.pk])),
        ("default", reverse("tasks:validation-run", args=[demo_suite.name, validation.pk])),
    ]
    for queue, url in pages:
        page = researcher_client.get(url).content.decode()
        assert f"queued on <code>{queue}</code>" in page, url
        assert f"no worker is consuming <code>{queue}</code>" in page, url
    assert "1 job waiting there" in researcher_client.get(pages[0][1]).content.decode()


def test_a_worker_beats_for_its_queues_from_start_until_it_stops(broker: redis.Redis) -> None:
    from types import SimpleNamespace

    from webapp.celery import ConsumerBeat, app

    assert ConsumerBeat in app.steps["consumer"]
    repeated: list[float] = []

    def call_repeatedly(every: float, fun: object, args: object) -> SimpleNamespace:
        repeated.append(every)
        return SimpleNamespace(cancel=lambda: None)

    timer = SimpleNamespace(call_repeatedly=call_repeatedly)
    queues = [SimpleNamespace(name="training")]
    parent = SimpleNamespace(task_consumer=SimpleNamespace(queues=queues), hostname="training@host", timer=timer)
    step = ConsumerBeat(parent)
    step.start(parent)
    assert queue_wait(JobQueue.TRAINING).consumers == 1 and len(repeated) == 1
    step.stop(parent)
    assert queue_wait(JobQueue.TRAINING).unconsumed


def test_the_health_pages_queue_row_counts_this_instances_jobs(broker: redis.Redis) -> None:
    from evaluation.health import queue_row

    base, *priorities = queue_list_keys(JobQueue.TRAINING, PREFIX)
    broker.lpush(base, b"{}", b"{}")
    broker.lpush(priorities[0], b"{}")
    broker.lpush(str(JobQueue.ROLLOUTS), b"{}")  # an unprefixed list is no queue of this instance's
    try:
        row = queue_row()
    finally:
        broker.delete(str(JobQueue.ROLLOUTS))
    assert "training 3" in row["value"] and "rollouts 0" in row["value"], row
