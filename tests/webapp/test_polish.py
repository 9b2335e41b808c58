"""The small things a new user meets first: error pages, the favicon, times, task titles,
the reward gap beyond the suite page, links in the README."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

from rewards.models import RewardSanity
from rewards.spec import load_spec
from tests.conftest import REPO, client_for
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db

NAV = ('href="/tasks/"', 'href="/trajectories/"', 'href="/batches/"', 'href="/profile/"')


@override_settings(DEBUG=False)
def test_a_missing_page_is_a_404_with_the_sites_navigation(reviewer: User) -> None:
    response = client_for(reviewer).get("/trajectories/00000000-0000-0000-0000-000000000000/")
    html = response.content.decode()
    assert response.status_code == 404
    assert "<h1>Not found</h1>" in html and all(link in html for link in NAV)
    assert 'class="topbar"' in Client().get("/no/such/page/").content.decode()


@override_settings(DEBUG=False)
def test_a_page_the_role_does_not_allow_is_a_403_with_navigation(outsider: User) -> None:
    response = client_for(outsider).get("/trajectories/")
    html = response.content.decode()
    assert response.status_code == 403 and "<h1>Not allowed</h1>" in html and "has no Crucible role" in html
    assert 'class="topbar"' in html and 'href="/profile/"' in html


@override_settings(DEBUG=False)
def test_a_server_error_is_a_500_with_the_sites_navigation(reviewer: User, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise RuntimeError("the database fell over")

    monkeypatch.setattr("webapp.views.dashboard_counts", broken)
    client = client_for(reviewer)
    client.raise_request_exception = False
    response = client.get("/")
    html = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong" in html and all(link in html for link in NAV)
    assert "the database fell over" not in html  # the error stays in the log


def test_the_favicon_is_served_and_linked(reviewer: User) -> None:
    client = client_for(reviewer)
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("/static/favicon.svg")
    icon = Client().get(response["Location"])
    assert icon.status_code == 200 and b"<svg" in b"".join(icon.streaming_content)  # type: ignore[attr-defined]
    assert '<link rel="icon" href="/static/favicon.svg"' in client.get("/").content.decode()


def test_times_read_as_people_say_them_with_the_exact_time_on_hover() -> None:
    from core.templatetags.timestamps import when

    moment = datetime.now(UTC) - timedelta(minutes=3)
    html = str(when(moment))
    iso = moment.isoformat(timespec="seconds")
    assert html == f'<time datetime="{iso}" title="{iso}">3\xa0minutes ago</time>'
    assert "3\xa0minutes ago" in str(when(moment.isoformat()))  # a report's ISO text too
    old = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
    assert ">2024-05-01 12:30</time>" in str(when(old))
    assert when(None) == "" and when("not a time") == "not a time"


def test_tasks_are_listed_with_a_title_and_show_their_reward_gap(reviewer: User) -> None:
    task = TaskFactory.create(statement="# `parse_config` crashes on empty input\n\nDetails follow.")
    bare = TaskFactory.create(suite=task.suite, statement="")
    client = client_for(reviewer)
    suite_page = client.get(f"/tasks/{task.suite.name}/").content.decode()
    assert '<td class="task-title">parse_config crashes on empty input</td>' in suite_page
    assert '<td class="task-title"></td>' in suite_page  # a task without a statement still lists
    detail = client.get(f"/tasks/{task.suite.name}/{task.task_id}/").content.decode()
    assert "parse_config crashes on empty input" in detail
    assert re.search(r'<dd class="column-reward_gap">– <small>not checked yet', detail)
    RewardSanity.objects.create(
        task=task, spec_version=load_spec().version, expected=1.0, empty=0.0, stubs={}, gap=0.75, separates=True
    )
    detail = client.get(f"/tasks/{task.suite.name}/{task.task_id}/").content.decode()
    assert re.search(r'<dd class="column-reward_gap"><span class="badge ok"[^>]*>0.75</span>', detail)
    assert client.get(f"/tasks/{bare.suite.name}/{bare.task_id}/").status_code == 200


def test_the_readme_and_docs_link_only_to_files_a_clone_has() -> None:
    for doc in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)", doc.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            assert (doc.parent / target).exists(), f"{doc.name} links to {target}, which a clone does not have"
