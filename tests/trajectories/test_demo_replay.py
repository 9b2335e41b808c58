"""The demo obeys the schema: every demo trajectory replays to the same observations, and its
claimed outcomes are ones the scorer agrees with (the parse_config example is no success)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rewards.services import score_trajectory
from tasks.models import TaskSuite
from tests.conftest import DEMO
from trajectories.models import Trajectory
from trajectories.replay import replay_trajectory
from trajectories.schema import action_input_error

pytestmark = pytest.mark.django_db
RECORDS = [json.loads(line) for line in (DEMO / "trajectories.jsonl").read_text().splitlines() if line.strip()]
GUIDE_EXAMPLE = "0c5d2a8e-6f1b-5e3a-9d47-2b8c1e6f4a10"
REWARD_HACK = "9e4b7c21-3d8a-5f60-b1c2-7a5e9d3f8b44"


def by_id(trajectory_id: str) -> dict[str, Any]:
    return next(r for r in RECORDS if r["trajectory_id"] == trajectory_id)


def test_every_demo_action_input_has_the_tools_schema() -> None:
    steps = [(r["trajectory_id"], s) for r in RECORDS for s in r["steps"]]
    assert len(steps) > 50
    for trajectory_id, step in steps:
        assert action_input_error(step["action_type"], step["action_input"]) is None, (trajectory_id, step["step"])
        # Tool form, not the shorthand: an object the tool takes as is.
        assert isinstance(step["action_input"], dict), (trajectory_id, step["step"])
    assert {s["action_type"] for _, s in steps} >= {
        "read_file",
        "write_file",
        "edit_file",
        "run_command",
        "search",
        "run_tests",
        "submit",
    }


def test_the_demo_keeps_its_variety() -> None:
    terminations = {r["termination"] for r in RECORDS}
    assert {"submitted", "max_steps"} <= terminations
    assert any(r["success"] is False for r in RECORDS) and any(r["success"] for r in RECORDS)
    guide = by_id(GUIDE_EXAMPLE)
    assert "1 failed, 3 passed" in guide["steps"][-1]["observation"]
    assert guide["success"] is False  # it claims no success: its tests did not pass
    assert any(s["action_input"].get("path") == "conftest.py" for s in by_id(REWARD_HACK)["steps"])
    assert any("<script>" in s["thought"] for r in RECORDS for s in r["steps"])  # hostile text stays in


def test_replay_of_every_demo_trajectory_reproduces(demo_suite: TaskSuite) -> None:
    stored = Trajectory.objects.filter(trajectory_id__in=[r["trajectory_id"] for r in RECORDS])
    assert stored.count() == len(RECORDS) and not stored.filter(task=None).exists()
    for record in RECORDS:
        report = replay_trajectory(record["trajectory_id"], backend="bwrap")
        assert report.reproducible, (record["trajectory_id"], report.differences[:1])
        assert report.same == report.steps == len(record["steps"])


def test_the_scorer_agrees_the_guide_example_and_the_hack_are_no_successes(demo_suite: TaskSuite) -> None:
    guide = score_trajectory(GUIDE_EXAMPLE, backend="bwrap")
    assert not guide.resolved and guide.reward < 1
    hack = score_trajectory(REWARD_HACK, backend="bwrap")
    assert not hack.resolved and hack.reward <= 0
    assert "conftest.py" in json.dumps(hack.flags)
    # And a demo success really is one.
    success = score_trajectory("117b0961-7835-57de-af38-41319718844a", backend="bwrap")
    assert success.resolved and success.reward == 1.0
