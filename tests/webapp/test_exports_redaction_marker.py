"""A trajectory redacted on import under today's rules is not scanned again on export, but for its flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command

from core.redaction import rules_version
from tasks.models import TaskSuite
from trajectories.models import Trajectory

pytestmark = pytest.mark.django_db
PLANTED = "AKIA" + "Q7ZRXW4T2PLM9VBN"


def exported(tmp_path: Path) -> str:
    out = tmp_path / "t.jsonl"
    call_command("export", "trajectories", "--format", "jsonl", "--out", str(out), verbosity=0)
    return out.read_text()


def test_imports_carry_the_rules_version_and_flags_written_later_are_still_redacted(
    demo_suite: TaskSuite, tmp_path: Path
) -> None:
    assert set(Trajectory.objects.values_list("redacted_with", flat=True)) == {rules_version()}
    trajectory = Trajectory.objects.order_by("trajectory_id").first()
    assert trajectory is not None
    # The reward service writes flags after the import, with evidence from the test run.
    Trajectory.objects.filter(pk=trajectory.pk).update(
        flags=[{"detector": "forged_test_run", "evidence": f"printed {PLANTED}"}]
    )
    text = exported(tmp_path)
    assert PLANTED not in text and "[REDACTED:aws_access_key]" in text
    assert len(text.splitlines()) == Trajectory.objects.count()
    first = json.loads(text.splitlines()[0])
    assert "redacted_with" not in first  # bookkeeping, not part of the record
