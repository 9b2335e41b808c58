"""The audit log: who launched, cancelled, resumed, cleared a flag, changed a role or made a
token, written by the services in the change's transaction, and shown to admins only."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from annotation.models import flag_key
from annotation.services import clear_flags
from core.audit import AuditAction, record
from core.models import ApiToken, AuditEvent
from tasks.models import TaskSuite
from tasks.services import start_validation_run
from tests.conftest import client_for, purge_queues
from tests.factories import TrajectoryFactory, UserFactory
from training.models import TrainingRun
from training.services import cancel_run
from trajectories.batches import start_batch
from trajectories.models import RolloutBatch
from trajectories.rollout_settings import RolloutSettings

pytestmark = pytest.mark.django_db


def events(action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("id"))


def test_launching_cancelling_and_resuming_a_batch_are_audited_with_who_did_it(
    demo_suite: TaskSuite, researcher: User
) -> None:
    batch = start_batch(demo_suite, RolloutSettings("scripted"), user=researcher, enqueue=False, task_ids=["task_0001"])
    client = client_for(researcher)
    assert client.post(f"/batches/{batch.pk}/cancel/").status_code == 302
    try:
        assert client.post(f"/batches/{batch.pk}/resume/").status_code == 302
    finally:
        purge_queues("rollouts")
    for action in (AuditAction.LAUNCH, AuditAction.CANCEL, AuditAction.RESUME):
        (event,) = events(action)
        assert (event.actor, event.actor_name) == (researcher, "rita-researcher")
        assert (event.target_type, event.target_id) == ("trajectories.rolloutbatch", str(batch.pk))
    assert events(AuditAction.LAUNCH)[0].detail["policy"] == "scripted"


def test_a_cancel_that_changes_nothing_records_nothing(demo_suite: TaskSuite, researcher: User) -> None:
    batch = start_batch(demo_suite, RolloutSettings("scripted"), user=researcher, enqueue=False, task_ids=["task_0001"])
    RolloutBatch.objects.filter(pk=batch.pk).update(status=RolloutBatch.Status.SUCCEEDED)
    assert client_for(researcher).post(f"/batches/{batch.pk}/cancel/").status_code == 302
    assert events(AuditAction.CANCEL) == []


def test_validation_and_training_runs_are_audited(demo_suite: TaskSuite, researcher: User) -> None:
    validation = start_validation_run(demo_suite, 1, researcher)
    run = TrainingRun.objects.create(name="sft-1", kind="sft", status="running")
    cancel_run(run, researcher, grace=0)
    (launch,) = events(AuditAction.LAUNCH)
    assert launch.target_id == str(validation.pk)
    assert launch.detail == {"kind": "validation", "suite": "demo", "runs": 1}
    (cancel,) = events(AuditAction.CANCEL)
    assert cancel.actor == researcher and cancel.target_type == "training.trainingrun"


def test_clearing_a_flag_is_audited(reviewer: User) -> None:
    flag = {"detector": "test_tampering", "evidence": "edited tests/test_x.py"}
    trajectory = TrajectoryFactory.create(flags=[flag], scored_at=timezone.now(), scored_spec="v1")
    clear_flags(reviewer, trajectory, [flag_key(flag)], "the test file was a fixture, not a test")
    (event,) = events(AuditAction.CLEAR_FLAG)
    assert event.actor == reviewer and event.detail["detectors"] == ["test_tampering"]
    assert event.target_id == str(trajectory.pk)


def test_creating_and_revoking_a_token_are_audited_without_the_secret(researcher: User) -> None:
    client = client_for(researcher)
    page = client.post("/profile/", {"name": "laptop"}).content.decode()
    secret = re.search(r"crc_[A-Za-z0-9_-]{30,}", page)
    assert secret is not None
    token = ApiToken.objects.get(user=researcher)
    assert client.post(f"/profile/tokens/{token.pk}/revoke/").status_code == 302
    (created,) = events(AuditAction.TOKEN_CREATE)
    (revoked,) = events(AuditAction.TOKEN_REVOKE)
    assert created.actor == revoked.actor == researcher
    assert created.detail["name"] == "laptop" and created.target_id == revoked.target_id == str(token.pk)
    dumped = json.dumps([[e.target_label, e.detail] for e in AuditEvent.objects.all()])
    assert secret.group(0) not in dumped


def test_a_role_change_in_the_admin_records_before_and_after() -> None:
    root = User.objects.create_superuser("root", password="correct horse battery")
    target = UserFactory.create(username="rhea", role="reviewer")
    client = Client()
    client.force_login(root)
    researcher_group = Group.objects.get_or_create(name="researcher")[0]
    form = {
        "username": "rhea",
        "is_active": "on",
        "groups": [str(researcher_group.pk)],
        "date_joined_0": "2026-01-01",
        "date_joined_1": "00:00:00",
        "initial-date_joined_0": "2026-01-01",
        "initial-date_joined_1": "00:00:00",
    }
    response = client.post(f"/admin/auth/user/{target.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    (event,) = events(AuditAction.ROLE_CHANGE)
    assert event.actor == root and event.target_id == str(target.pk)
    assert (event.detail["before"], event.detail["after"]) == ("reviewer", "researcher")
    # Saving again with the same groups is no role change.
    assert client.post(f"/admin/auth/user/{target.pk}/change/", form).status_code == 302
    assert len(events(AuditAction.ROLE_CHANGE)) == 1


def test_the_audit_page_is_for_admins_only(researcher: User, reviewer: User, admin_user: User) -> None:
    assert Client().get("/audit/").status_code == 302  # to the login page
    assert client_for(researcher).get("/audit/").status_code == 403
    assert client_for(reviewer).get("/audit/").status_code == 403
    page = client_for(admin_user).get("/audit/")
    assert page.status_code == 200
    assert 'href="/audit/"' in page.content.decode()  # the nav link, shown to admins
    assert 'href="/audit/"' not in client_for(researcher).get("/").content.decode()


def test_the_audit_page_filters_pages_and_escapes(admin_user: User, researcher: User) -> None:
    record(researcher, AuditAction.LAUNCH, "batch <script>alert(1)</script>", kind="batch")
    for n in range(55):
        record(None, AuditAction.REDACT, f"trajectory import f{n}.jsonl", rule="email", where="x", count=1)
    client = client_for(admin_user)
    launched = client.get("/audit/", {"action": "launch"}).content.decode()
    assert "rita-researcher" in launched and "&lt;script&gt;alert(1)" in launched and "<script>alert" not in launched
    assert "f3.jsonl" not in launched
    by_actor = client.get("/audit/", {"actor": "rita"}).content.decode()
    assert "1 event" in by_actor
    by_target = client.get("/audit/", {"target": "f17.jsonl"}).content.decode()
    assert "f17.jsonl" in by_target and "1 event" in by_target
    first = client.get("/audit/").content.decode()
    assert "56 events" in first and "page 1 of 2" in first
    assert "page 2 of 2" in client.get("/audit/", {"page": 2}).content.decode()


def test_the_admin_shows_the_log_read_only(admin_user: User) -> None:
    root = User.objects.create_superuser("root", password="correct horse battery")
    event = record(root, AuditAction.DELETE, "something")
    client = Client()
    client.force_login(root)
    assert client.get("/admin/core/auditevent/").status_code == 200
    assert client.get(f"/admin/core/auditevent/{event.pk}/change/").status_code == 200  # view only
    assert client.post(f"/admin/core/auditevent/{event.pk}/change/", {"action": "x"}).status_code == 403
    assert client.get("/admin/core/auditevent/add/").status_code == 403
    assert client.post(f"/admin/core/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert AuditEvent.objects.get(pk=event.pk).action == "delete"
