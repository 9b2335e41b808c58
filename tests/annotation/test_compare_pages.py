from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from annotation.models import Assignment, Comparison, Judgement
from tests.annotation.pairs_data import HOSTILE, comparison_set, secret_pair
from tests.conftest import client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def reviewer(name: str = "rob") -> Client:
    return client_for(UserFactory.create(username=name, role="reviewer"))


def open_next(client: Client, set_name: str) -> tuple[int, str]:
    response = client.get(f"/annotation/sets/{set_name}/next/")
    assert response.status_code == 302
    page = client.get(response["Location"])
    assert page.status_code == 200
    return int(response["Location"].rstrip("/").split("/")[-1]), page.content.decode()


def test_the_review_page_is_blind_and_keeps_hostile_text_as_text() -> None:
    cache.clear()
    _, secrets = secret_pair()
    client = reviewer()
    pk, html = open_next(client, "blind")
    # The page shows plain diffs at once and asks for each side's highlighted one.
    diffs = [client.get(f"/annotation/compare/{pk}/diff/{side}/") for side in ("left", "right")]
    assert [d.status_code for d in diffs] == [200, 200]
    assert f'hx-get="/annotation/compare/{pk}/diff/left/"' in html
    highlighted = "".join(d.content.decode() for d in diffs)
    assert 'class="n">parse</span>' in highlighted  # highlighted by pygments, as Python
    again = client.get(f"/annotation/compare/{pk}/").content.decode()
    assert 'class="n">parse</span>' in again and "hx-get" not in again  # from the cache now
    for text in (html, highlighted, again):
        for secret in secrets:
            assert secret not in text, f"the review page reveals {secret!r}"
        assert HOSTILE not in text and "<script>alert" not in text
        assert "&lt;script&gt;" in text  # the statement and the patch are shown, escaped
    assert "src/parser.py" in html
    assert "3/3" in html and "1/3" in html  # hidden-test results of each side, without the reward
    assert reviewer("eve").get(f"/annotation/compare/{pk}/diff/left/").status_code == 404


def test_the_trajectory_links_follow_the_sides_this_reviewer_was_shown() -> None:
    cset, _ = secret_pair()
    client = reviewer()
    pk, _ = open_next(client, cset.name)
    comparison = Comparison.objects.select_related("trajectory_a", "trajectory_b").get(pk=pk)
    assignment = Assignment.objects.get(comparison=comparison)
    left, right = comparison.trajectory_a, comparison.trajectory_b
    if assignment.swapped:
        left, right = right, left
    assert client.get(f"/annotation/compare/{pk}/trajectory/left/")["Location"].endswith(f"{left.trajectory_id}/")
    assert client.get(f"/annotation/compare/{pk}/trajectory/right/")["Location"].endswith(f"{right.trajectory_id}/")
    assert reviewer("eve").get(f"/annotation/compare/{pk}/trajectory/left/").status_code == 404


def test_submitting_a_verdict_stores_it_in_pair_terms_and_loads_the_next_pair() -> None:
    comparison_set(name="flow", tasks=2)
    client = reviewer()
    pk, html = open_next(client, "flow")
    assert 'name="reason"' in html and "compare.js" in html
    missing = client.post(f"/annotation/compare/{pk}/", {"choice": "A", "reason": ""})
    assert missing.status_code == 400 and b"This field is required" in missing.content
    done = client.post(f"/annotation/compare/{pk}/", {"choice": "A", "reason": "left is right", "tags": ["correct"]})
    assert done.status_code == 302 and done["Location"] == "/annotation/sets/flow/next/"
    judgement = Judgement.objects.get()
    assert judgement.choice == ("B" if judgement.swapped else "A")
    assert judgement.tags == ["correct"]
    second, _ = open_next(client, "flow")
    assert second != pk
    skipped = client.post(f"/annotation/compare/{second}/skip/")
    assert skipped.status_code == 302
    finished = client.get(client.get(skipped["Location"])["Location"])
    assert b"The queue is done" in finished.content


def test_a_pair_held_by_someone_else_is_refused_with_a_reason() -> None:
    comparison_set(name="held", tasks=1)
    pk, _ = open_next(reviewer("ann"), "held")
    page = reviewer("ben").get(f"/annotation/compare/{pk}/")
    assert page.status_code == 409
    assert b"another reviewer holds this pair" in page.content
    judged = reviewer("carl").post(f"/annotation/compare/{pk}/", {"choice": "A", "reason": "x"})
    assert judged.status_code == 409


def test_the_queue_page_shows_progress_and_researchers_see_every_reviewer() -> None:
    comparison_set(name="progress", tasks=3, reviewers=2)
    client = reviewer("ann")
    pk, _ = open_next(client, "progress")
    client.post(f"/annotation/compare/{pk}/", {"choice": "tie", "reason": "same"})
    page = client.get("/annotation/")
    html = page.content.decode()
    assert "Start reviewing" in html and "/annotation/sets/progress/next/" in html
    assert "0 / 3 (k=2)" in html and "1 / 6" in html
    assert 'id="reviewers"' not in html
    researcher = client_for(UserFactory.create(username="rita", role="researcher"))
    html = researcher.get("/annotation/").content.decode()
    assert 'id="reviewers"' in html and "<td>ann</td><td>1</td>" in html
    assert client.get("/annotation/guidelines/").status_code == 200


def test_outsiders_cannot_see_the_queue_or_a_pair() -> None:
    comparison_set(name="closed", tasks=1)
    outsider = client_for(UserFactory.create(username="oscar"))
    assert outsider.get("/annotation/").status_code == 403
    assert outsider.get("/annotation/sets/closed/next/").status_code == 403
    assert Client().get("/annotation/").status_code == 302


def test_the_review_page_shows_the_place_in_the_set_and_folds_a_statement_read_before() -> None:
    comparison_set(name="fold", tasks=2)
    client = reviewer()
    pk, html = open_next(client, "fold")
    assert '<span id="queue-position">pair 1 of 2 in this set</span>' in html
    assert '<details class="card" id="statement" open>' in html and "Fix bug number" in html
    again = client.get(f"/annotation/compare/{pk}/").content.decode()
    assert '<details class="card" id="statement">' in again and "read before" in again
    assert "Fix bug number" in again  # folded, not gone
    client.post(f"/annotation/compare/{pk}/skip/")
    _, html = open_next(client, "fold")  # another task: read for the first time
    assert '<details class="card" id="statement" open>' in html and "pair 2 of 2 in this set" in html


def test_a_reviewer_undoes_a_verdict_from_the_next_page_and_nobody_else_can() -> None:
    comparison_set(name="undo", tasks=2)
    client = reviewer("ann")
    pk, _ = open_next(client, "undo")
    client.post(f"/annotation/compare/{pk}/", {"choice": "B", "reason": "right <b>wins</b>", "tags": ["minimal"]})
    second, html = open_next(client, "undo")
    assert f'action="/annotation/compare/{pk}/undo/"' in html and "Undo last verdict (Right is better)" in html
    assert "pair 2 of 2 in this set" in html

    refused = reviewer("ben").post(f"/annotation/compare/{pk}/undo/")
    assert refused.status_code == 409 and b"only your last verdict can be undone" in refused.content
    assert Judgement.objects.count() == 1
    assert client.get(f"/annotation/compare/{pk}/undo/").status_code == 405

    undone = client.post(f"/annotation/compare/{pk}/undo/")
    assert undone.status_code == 302 and undone["Location"] == f"/annotation/compare/{pk}/"
    assert not Judgement.objects.exists()
    html = client.get(undone["Location"]).content.decode()
    assert re.search(r'<input type="radio" name="choice" value="B" [^>]*checked>', html)
    assert "right &lt;b&gt;wins&lt;/b&gt;</textarea>" in html
    assert re.search(r'<input type="checkbox" name="tags" value="minimal" [^>]*checked>', html)
    assert "pair 1 of 2 in this set" in html and "Undo last verdict" not in html

    client.post(f"/annotation/compare/{pk}/", {"choice": "A", "reason": "left"})
    Assignment.objects.filter(comparison_id=pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert "Undo last verdict" not in client.get(f"/annotation/compare/{second}/").content.decode()
    expired = client.post(f"/annotation/compare/{pk}/undo/")
    assert expired.status_code == 409 and b"your hold on that pair has ended" in expired.content
    assert Judgement.objects.get().choice in ("A", "B")


def test_the_queue_done_page_offers_to_undo_the_last_verdict() -> None:
    comparison_set(name="last", tasks=1)
    client = reviewer("ann")
    pk, _ = open_next(client, "last")
    done = client.post(f"/annotation/compare/{pk}/", {"choice": "tie", "reason": "same"})
    page = client.get(client.get(done["Location"])["Location"]).content.decode()
    assert "The queue is done" in page and f'action="/annotation/compare/{pk}/undo/"' in page
    assert "Undo your last verdict (Tie)" in page
    assert client.post(f"/annotation/compare/{pk}/undo/").status_code == 302
    assert not Judgement.objects.exists()
