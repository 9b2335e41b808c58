"""The review queue at /annotation/marked/: what a person was asked to look at, and no more."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User

from annotation.models import flag_key
from annotation.services import clear_flags, mark_for_review
from tests.conftest import client_for
from tests.factories import TrajectoryFactory

pytestmark = pytest.mark.django_db

FLAG = {"detector": "eq_override", "evidence": "class Any: def __eq__(self, o): return True", "path": "src/a.py"}
OTHER = {"detector": "test_deletion", "evidence": "tests/test_a.py deleted"}


def short(trajectory: object) -> str:
    return str(trajectory.trajectory_id)[:8]  # type: ignore[attr-defined]


def test_the_queue_holds_marked_and_uncleared_flagged_trajectories_only(reviewer: User, researcher: User) -> None:
    now = datetime.now(UTC)
    marked = TrajectoryFactory.create()
    mark_for_review(researcher, marked, "the agent <b>edited</b> the tests?")
    flagged = TrajectoryFactory.create(flags=[FLAG, OTHER], scored_at=now, scored_spec="v1")
    half_cleared = TrajectoryFactory.create(flags=[FLAG, OTHER], scored_at=now, scored_spec="v1")
    clear_flags(reviewer, half_cleared, [flag_key(FLAG)], "equality is what the task asks for")
    cleared = TrajectoryFactory.create(flags=[FLAG], scored_at=now, scored_spec="v1")
    clear_flags(reviewer, cleared, [flag_key(FLAG)], "harmless")
    claimed_only = TrajectoryFactory.create(flags=[FLAG], scored_at=None)  # an imported file's claim
    quiet = TrajectoryFactory.create()

    client = client_for(reviewer)
    html = client.get("/annotation/marked/").content.decode()
    for shown in (marked, flagged, half_cleared):
        assert short(shown) in html
    for hidden in (cleared, claimed_only, quiet):
        assert short(hidden) not in html
    assert "the agent &lt;b&gt;edited&lt;/b&gt; the tests?" in html  # a note is text
    assert "rita-researcher" in html and "4 trajectories" not in html and "3 trajectories" in html

    only_marked = client.get("/annotation/marked/?show=marked").content.decode()
    assert short(marked) in only_marked and short(flagged) not in only_marked
    only_flagged = client.get("/annotation/marked/?show=flagged").content.decode()
    assert short(flagged) in only_flagged and short(half_cleared) in only_flagged and short(marked) not in only_flagged
    assert client.get("/annotation/marked/?show=nonsense&page=x").status_code == 200
    assert 'href="/annotation/marked/"' in html  # in the navigation
