"""Redaction on import: planted secrets in a task and a trajectory never reach the database,
and the audit log lists what was replaced by rule and field, never the text."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import orjson
import pytest

from core.audit import AuditAction
from core.models import AuditEvent
from tasks.models import Task
from tasks.services import import_task_dirs
from tasks.storage import tree_path
from trajectories.models import Step, Trajectory
from trajectories.services import import_trajectories

pytestmark = pytest.mark.django_db

# Made-up values of the documented shapes; none is a live credential.
AWS_KEY = "AKIAQ3EGUJ5XMPL7TEST"
KEY_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"
PRIVATE_KEY = f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}\n-----END RSA PRIVATE KEY-----"
HOST = "vault-3.prod.internal"
SECRETS = (AWS_KEY, KEY_BODY, HOST)


def redact_events() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=AuditAction.REDACT))


def by_rule_and_where(events: list[AuditEvent]) -> dict[tuple[str, str], int]:
    return {(e.detail["rule"], e.detail["where"]): e.detail["count"] for e in events}


def assert_nowhere_in_the_audit_log(*secrets: str) -> None:
    dumped = json.dumps([[e.target_label, e.detail] for e in AuditEvent.objects.all()])
    for secret in secrets:
        assert secret not in dumped


def plant_in_task(task_dir: Path) -> None:
    statement = task_dir / "task.md"
    statement.write_text(
        statement.read_text() + f"\nThe staging box is {HOST}; use key {AWS_KEY}.\n\n```\n{PRIVATE_KEY}\n```\n"
    )
    meta = json.loads((task_dir / "metadata.json").read_text())
    meta["hints_text"] = f"ask ops on {HOST}"
    (task_dir / "metadata.json").write_text(json.dumps(meta))
    patch = task_dir / "expected_patch"
    patch.write_text(patch.read_text().replace("+    if lines and", f"+    # {AWS_KEY}\n+    if lines and", 1))
    # A file of the repository: reported, but kept (the tests run on it).
    (task_dir / "repo_snapshot" / "DEPLOY.md").write_text(f"Deploy to {HOST}\n")


def test_a_planted_key_block_and_host_in_a_task_are_redacted_on_import_and_audited(task_dir: Path) -> None:
    plant_in_task(task_dir)
    import_task_dirs(task_dir, "guide")
    task = Task.objects.get(task_id="task_0001")
    for secret in SECRETS:
        assert secret not in task.statement and secret not in json.dumps(task.metadata)
    assert AWS_KEY not in task.expected_patch
    assert "[REDACTED:private_key_block]" in task.statement and "[REDACTED:internal_host]" in task.statement
    assert task.metadata["hints_text"] == "ask ops on [REDACTED:internal_host]"
    assert "+    # [REDACTED:aws_access_key]\n" in task.expected_patch
    # The stored repository is the one the tests run on: found, reported, unchanged.
    assert HOST in (tree_path(task.snapshot_hash) / "DEPLOY.md").read_text()

    events = redact_events()
    assert {e.target_id for e in events} == {str(task.pk)} and {e.actor for e in events} == {None}
    assert by_rule_and_where(events) == {
        ("aws_access_key", "task.statement"): 1,
        ("private_key_block", "task.statement"): 1,
        ("internal_host", "task.statement"): 1,
        ("internal_host", "task.metadata.hints_text"): 1,
        ("aws_access_key", "task.expected_patch"): 1,
        ("internal_host", "task.snapshot/DEPLOY.md (kept: repository file)"): 1,
    }
    assert_nowhere_in_the_audit_log(*SECRETS)


def test_reimporting_a_redacted_task_changes_nothing_and_logs_nothing_more(task_dir: Path) -> None:
    plant_in_task(task_dir)
    import_task_dirs(task_dir, "guide")
    logged = len(redact_events())
    result = import_task_dirs(task_dir, "guide")
    assert (result.created, result.updated, result.unchanged) == (0, 0, 1)
    assert len(redact_events()) == logged


def write_trajectory(path: Path) -> Path:
    record = {
        "trajectory_id": str(uuid.uuid4()),
        "task_id": "task_0001",
        "prompt": f"Fix it. Credentials: {AWS_KEY}",
        "policy": {"kind": "openai", "model": "m", "base_url": f"https://{HOST}/v1"},
        "steps": [
            {"step": 1, "action_type": "read_file", "action_input": {"path": "a.py"}, "observation": "x = 1\n"},
            {
                "step": 2,
                "action_type": "run_command",
                "action_input": {"command": f"cat ~/.ssh/id_rsa; curl http://{HOST}/"},
                "observation": f"{PRIVATE_KEY}\ncurl: (6) Could not resolve host: {HOST}",
            },
            {
                "step": 3,
                "action_type": "write_file",
                "action_input": {"path": "k.txt", "content": AWS_KEY},
                "observation": "written",
            },
        ],
        "patch": f"--- a/k.txt\n+++ b/k.txt\n@@ -0,0 +1 @@\n+{AWS_KEY}\n",
        "termination": "submitted",
    }
    path.write_bytes(orjson.dumps(record) + b"\n")
    return path


def test_a_planted_key_block_and_host_in_a_trajectory_are_redacted_on_import_and_audited(tmp_path: Path) -> None:
    path = write_trajectory(tmp_path / "planted.jsonl")
    result = import_trajectories(path, allow_unknown_tasks=True)
    assert result.created == 1 and result.redacted == 7
    trajectory = Trajectory.objects.get()
    steps = list(Step.objects.filter(trajectory=trajectory).order_by("step"))
    stored = json.dumps(
        [trajectory.prompt, trajectory.policy, trajectory.patch]
        + [[s.action_input, s.observation, s.thought] for s in steps]
    )
    for secret in SECRETS:
        assert secret not in stored
    assert steps[1].observation.startswith("[REDACTED:private_key_block]\ncurl: (6)")
    assert trajectory.patch.endswith("+[REDACTED:aws_access_key]\n")
    assert trajectory.policy["base_url"] == "https://[REDACTED:internal_host]/v1"

    (imported,) = AuditEvent.objects.filter(action=AuditAction.IMPORT)
    assert imported.detail == {"created": 1, "skipped": 0, "redacted": 7}
    events = redact_events()
    assert {e.target_label for e in events} == {"trajectory import planted.jsonl"}
    assert by_rule_and_where(events) == {
        ("aws_access_key", "trajectory.prompt"): 1,
        ("internal_host", "trajectory.policy.base_url"): 1,
        ("aws_access_key", "trajectory.patch"): 1,
        ("internal_host", "trajectory.steps[].action_input.command"): 1,
        ("private_key_block", "trajectory.steps[].observation"): 1,
        ("internal_host", "trajectory.steps[].observation"): 1,
        ("aws_access_key", "trajectory.steps[].action_input.content"): 1,
    }
    assert_nowhere_in_the_audit_log(*SECRETS)


def test_a_failed_trajectory_import_leaves_no_audit_record(tmp_path: Path) -> None:
    path = write_trajectory(tmp_path / "bad.jsonl")
    path.write_bytes(path.read_bytes() + b"{not json\n")
    with pytest.raises(ValueError, match="line 2"):
        import_trajectories(path, allow_unknown_tasks=True)
    assert not AuditEvent.objects.exists() and not Trajectory.objects.exists()


def test_a_built_task_records_how_it_was_generated(task_dir: Path) -> None:
    meta = json.loads((task_dir / "metadata.json").read_text())
    meta["source"] = "synthetic_mutation"
    meta["mutation"] = [{"path": "configkit/config.py", "operator": "drop_guard", "description": "x" * 500, "line": 43}]
    (task_dir / "metadata.json").write_text(json.dumps(meta))
    import_task_dirs(task_dir, "synth")
    event = AuditEvent.objects.get(action=AuditAction.GENERATE)
    task = Task.objects.get(task_id="task_0001")
    assert event.target_id == str(task.pk) and event.detail["version"] == task.version
    assert event.detail["source"] == "synthetic_mutation" and event.detail["edits"] == 1
    assert event.detail["mutation"][0]["operator"] == "drop_guard"
    assert len(event.detail["mutation"][0]["description"]) == 200
