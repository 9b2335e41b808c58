from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import factory
from django.contrib.auth.models import Group, User

from tasks.models import Task, TaskSuite
from trajectories.models import Step, Trajectory

PASSWORD = "correct horse battery"


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password(PASSWORD)

    @factory.post_generation
    def role(obj: User, create: bool, extracted: str | None, **kwargs: Any) -> None:  # noqa: N805
        if create and extracted:
            # get_or_create: transactional tests flush the groups the migration made.
            obj.groups.add(Group.objects.get_or_create(name=extracted)[0])


class SuiteFactory(factory.django.DjangoModelFactory[TaskSuite]):
    class Meta:
        model = TaskSuite
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"suite-{n}")


class TaskFactory(factory.django.DjangoModelFactory[Task]):
    class Meta:
        model = Task

    task_id = factory.Sequence(lambda n: f"task_{n:04d}")
    suite = factory.SubFactory(SuiteFactory)
    statement = "Fix the crash."
    snapshot_hash = "sha256:" + "0" * 64
    tests_hash = "sha256:" + "1" * 64
    version = "sha256:" + "2" * 64


class TrajectoryFactory(factory.django.DjangoModelFactory[Trajectory]):
    class Meta:
        model = Trajectory

    trajectory_id = factory.LazyFunction(uuid.uuid4)
    task = factory.SubFactory(TaskFactory)
    task_ref = factory.LazyAttribute(lambda o: o.task.task_id)
    suite = factory.LazyAttribute(lambda o: o.task.suite)
    policy = factory.LazyFunction(lambda: {"kind": "scripted", "model": "oracle"})
    policy_kind = "scripted"
    policy_model = "oracle"
    final_reward = 1.0
    success = True
    termination = "submitted"
    created_at = factory.LazyFunction(lambda: datetime.now(UTC))


class StepFactory(factory.django.DjangoModelFactory[Step]):
    class Meta:
        model = Step

    trajectory = factory.SubFactory(TrajectoryFactory)
    step = factory.Sequence(lambda n: n + 1)
    action_type = "read_file"
    action_input = "src/config.py"
    observation = "def parse_config(text):\n    ..."
