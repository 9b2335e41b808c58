"""The agreement page, the disagreement list, and settling a pair after discussion."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from annotation.models import Comparison, ComparisonSet
from tests.annotation.agreement_fixtures import Pair, day, make_set
from tests.conftest import client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'


@pytest.fixture
def cset() -> ComparisonSet:
    return make_set(
        "mixed",
        [
            Pair({"ann": "A", "ben": "A"}, when=day(2)),  # agreed
            Pair({"ann": "A", "ben": "B"}, reasons={"ann": HOSTILE, "ben": "B keeps the API"}, when=day(3)),
            Pair({"ann": "tie", "ben": "both_bad"}, when=day(3)),
        ],
    )


def pair(cset: ComparisonSet, position: int) -> Comparison:
    return Comparison.objects.get(comparison_set=cset, position=position)


def test_the_agreement_page_shows_the_figures_and_the_trend(cset: ComparisonSet, reviewer_client: Client) -> None:
    response = reviewer_client.get(f"/annotation/sets/{cset.name}/agreement/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Cohen&#x27;s kappa" in html or "Cohen's kappa" in html
    assert 'id="agreement-trend"' in html and "plotly-3.7.0.min.js" in html
    chart = json.loads(re.search(r'id="agreement-chart" type="application/json">(.*?)</script>', html).group(1))  # type: ignore[union-attr]
    assert chart["x"] == ["2026-03-02", "2026-03-03"]
    assert chart["series"]["reviewers with the majority"] == [1.0, 0.0]
    assert "verified_reward with people" in chart["series"]
    assert "2 disagreements" in html


def test_the_list_shows_only_pairs_reviewers_disagree_on(cset: ComparisonSet, reviewer_client: Client) -> None:
    html = reviewer_client.get(f"/annotation/sets/{cset.name}/disagreements/").content.decode()
    assert f"#{pair(cset, 1).pk}<" in html and f"#{pair(cset, 2).pk}<" in html
    assert f"#{pair(cset, 0).pk}<" not in html
    assert "split" in html


def test_the_pair_page_shows_every_reason_as_text(cset: ComparisonSet, reviewer_client: Client) -> None:
    Comparison.objects.filter(pk=pair(cset, 1).pk).update(resolution_note=HOSTILE)
    response = reviewer_client.get(f"/annotation/sets/{cset.name}/disagreements/{pair(cset, 1).pk}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;" in html
    assert "B keeps the API" in html
    assert 'id="resolve-form"' not in html  # reviewers read, researchers resolve


def test_a_researcher_resolves_a_pair_with_a_choice_and_a_note(cset: ComparisonSet, researcher: User) -> None:
    target = pair(cset, 1)
    url = f"/annotation/sets/{cset.name}/disagreements/{target.pk}/"
    client = client_for(researcher)
    assert 'id="resolve-form"' in client.get(url).content.decode()
    response = client.post(url, {"choice": "B", "note": "B keeps the public API; A renames it."})
    assert response.status_code == 302
    target.refresh_from_db()
    assert target.resolution == "B"
    assert target.resolution_note == "B keeps the public API; A renames it.\n\n— rita-researcher"
    html = client.get(url).content.decode()
    assert "resolved: B" in html
    assert "resolved: B" in client.get(f"/annotation/sets/{cset.name}/disagreements/").content.decode()


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"choice": "C", "note": "why"}, "choice must be one of"),
        ({"choice": "A", "note": "   "}, "a resolution needs a note"),
        ({"choice": "A", "note": "x" * 6000}, "the note is too long"),
    ],
)
def test_a_bad_resolution_is_refused_and_changes_nothing(
    cset: ComparisonSet, researcher: User, form: dict[str, str], message: str
) -> None:
    target = pair(cset, 1)
    response = client_for(researcher).post(f"/annotation/sets/{cset.name}/disagreements/{target.pk}/", form)
    assert response.status_code == 400
    assert message in response.content.decode()
    target.refresh_from_db()
    assert (target.resolution, target.resolution_note) == ("", "")


def test_only_researchers_resolve_and_only_people_with_a_role_look(
    cset: ComparisonSet, reviewer_client: Client, outsider: User
) -> None:
    target = pair(cset, 1)
    url = f"/annotation/sets/{cset.name}/disagreements/{target.pk}/"
    assert reviewer_client.post(url, {"choice": "A", "note": "mine"}).status_code == 403
    target.refresh_from_db()
    assert target.resolution == ""
    assert client_for(outsider).get(url).status_code == 403
    assert Client().get(url).status_code == 302  # to the login page
    assert (
        reviewer_client.get(f"/annotation/sets/{cset.name}/disagreements/{pair(cset, 0).pk + 999}/").status_code == 404
    )
    assert reviewer_client.get("/annotation/sets/nope/agreement/").status_code == 404


def test_a_reviewer_who_may_still_judge_a_pair_cannot_read_its_votes(researcher: User) -> None:
    """k = 3 and two votes so far: a third reviewer must judge without the others' reasons."""
    cset = make_set("open", [Pair({"ann": "A", "ben": "B"}), Pair({"ann": "A", "ben": "B", "cat": "A"})], k=3)
    waiting, complete = pair(cset, 0), pair(cset, 1)
    dee = UserFactory.create(username="dee", role="reviewer")
    listing = f"/annotation/sets/{cset.name}/disagreements/"
    html = client_for(dee).get(listing).content.decode()
    assert f"#{complete.pk}<" in html and f"#{waiting.pk}<" not in html
    assert client_for(dee).get(f"{listing}{waiting.pk}/").status_code == 404
    assert client_for(dee).get(f"{listing}{complete.pk}/").status_code == 200
    ann = User.objects.get(username="ann")  # judged it already: nothing left to sway
    assert client_for(ann).get(f"{listing}{waiting.pk}/").status_code == 200
    assert f"#{waiting.pk}<" in client_for(ann).get(listing).content.decode()
    assert f"#{waiting.pk}<" in client_for(researcher).get(listing).content.decode()
    Comparison.objects.filter(pk=waiting.pk).update(resolution="A", resolution_note="settled")
    assert client_for(dee).get(f"{listing}{waiting.pk}/").status_code == 200
