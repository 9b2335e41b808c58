"""Reviewers' pages: each one's work and agreement with people's verdicts; who may see what."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from annotation.models import Judgement
from annotation.reviewer_stats import reviewer_rows
from tests.annotation.agreement_fixtures import Pair, make_set
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script>'
VOTES = [
    Pair({"ann": "A", "ben": "A"}),  # both agreed with the verdict
    Pair({"ann": "A", "ben": "B", "cat": "B"}, reasons={"ann": HOSTILE}),  # B, two of three
    Pair({"ann": "B", "ben": "A"}, resolution="A"),  # a researcher settled it for ben
    Pair({"ann": "A"}),  # only ann: her own vote is no measure of her
]


def test_each_reviewer_is_counted_against_the_verdicts_of_pairs_others_judged_too(researcher: User) -> None:
    make_set("judged", VOTES)
    rows = {row.user.username: row for row in reviewer_rows()}
    assert rows["ann"].judged == 4 and rows["ann"].sets == 1
    # Pair 2's verdict is B (2 of 3), pair 3's the resolution A: ann agreed on pair 1 only; pair 4 is hers alone.
    assert (rows["ann"].agreed, rows["ann"].compared) == (1, 3)
    assert (rows["ben"].agreed, rows["ben"].compared) == (3, 3)
    assert (rows["cat"].agreed, rows["cat"].compared) == (1, 1)

    page = client_for(researcher).get("/annotation/reviewers/").content.decode()
    assert 'data-reviewer="ann"' in page and "0.33 <small>(1 of 3)</small>" in page
    detail = client_for(researcher).get("/annotation/reviewers/ann/").content.decode()
    assert detail.count('class="badge ok">agreed') == 1 and detail.count('class="badge bad">differed') == 2
    assert HOSTILE not in detail and "&lt;script&gt;" in detail


def test_a_reviewer_sees_their_own_page_and_no_one_elses(researcher: User) -> None:
    make_set("judged", VOTES)
    ann = User.objects.get(username="ann")
    client = client_for(ann)
    assert client.get("/annotation/reviewers/ann/").status_code == 200
    assert 'id="my-judgements"' in client.get("/annotation/").content.decode()
    assert client.get("/annotation/reviewers/ben/").status_code == 403
    assert client.get("/annotation/reviewers/").status_code == 403
    assert client_for(researcher).get("/annotation/reviewers/nobody/").status_code == 404
    assert Judgement.objects.filter(reviewer=ann).count() == 4
