"""Properties of the JSONL trajectory import, over records hypothesis makes up.

Any valid record imports and exports back with the same fields (NULs become U+FFFD, the one
change PostgreSQL forces); any corruption of one line of a file is refused with a one-line
error naming that line, and nothing of the file is stored, even chunks written before it.
"""

from __future__ import annotations

import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
import pytest
from django.db import transaction
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from trajectories import services
from trajectories.exports import iter_trajectory_lines
from trajectories.models import Step, Trajectory
from trajectories.schema import RecordError, check_record, format_time
from trajectories.services import import_trajectories

pytestmark = pytest.mark.django_db

# Hostile text: any code point but surrogates (not encodable), with NULs, quotes, newlines,
# right-to-left marks. No "@" or ".": redaction (core.redaction) may rewrite what looks like an
# e-mail address or a host name on import, which is a change on purpose, not a round-trip fault.
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="@."), max_size=40)
# Bounded for `make test`; no shrinking (each example is a database round trip: a failure would
# shrink for minutes) and no example database left in the working tree.
BOUNDED = settings(
    deadline=None, database=None, phases=(Phase.explicit, Phase.generate), suppress_health_check=[HealthCheck.too_slow]
)

ACTION_INPUTS: dict[str, st.SearchStrategy[Any]] = {
    "read_file": st.one_of(TEXT, st.fixed_dictionaries({"path": TEXT})),
    "write_file": st.fixed_dictionaries({"path": TEXT, "content": TEXT}),
    "edit_file": st.fixed_dictionaries({"path": TEXT, "old_text": TEXT, "new_text": TEXT}),
    "run_command": st.one_of(TEXT, st.fixed_dictionaries({"command": TEXT})),
    "search": st.fixed_dictionaries({"pattern": TEXT}),
    "run_tests": st.one_of(st.none(), st.fixed_dictionaries({"paths": st.lists(TEXT, max_size=3)})),
    "submit": st.one_of(st.none(), st.just({})),
}
TIMES = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))
NUMBERS = st.floats(allow_nan=False, allow_infinity=False, width=64)
# A claimed reward is kept in a jsonb column, which writes 1e20 as the integer 100000000000000000000;
# read back, that is a Python int orjson cannot write (over 64 bits) and the export fails. Known,
# reported; the round trip is asserted below that size.
CLAIMED_NUMBERS = st.floats(min_value=-1e15, max_value=1e15, allow_nan=False)


@st.composite
def steps(draw: st.DrawFn, number: int) -> dict[str, Any]:
    action_type = draw(st.sampled_from(sorted(ACTION_INPUTS)))
    step: dict[str, Any] = {
        "step": number,
        "action_type": action_type,
        "action_input": draw(ACTION_INPUTS[action_type]),
        "observation": draw(TEXT),
        "observation_truncated": draw(st.booleans()),
        "thought": draw(TEXT),
        "reward": draw(st.none() | NUMBERS),
        "timestamp": draw(st.none() | TIMES.map(format_time)),
        "duration_ms": draw(st.none() | NUMBERS),
        "exit_code": draw(st.none() | st.integers(-(2**31), 2**31 - 1)),
    }
    if draw(st.booleans()):
        step["x_tool_meta"] = draw(TEXT)  # a key the schema does not know is kept
    return step


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(0, 4))
    record: dict[str, Any] = {
        "schema_version": 1,
        "trajectory_id": str(draw(st.uuids())),
        "task_id": draw(st.text(st.characters(codec="utf-8", exclude_characters="@.\x00"), min_size=1, max_size=40)),
        "prompt": draw(TEXT),
        "policy": {"kind": draw(st.sampled_from(["hf", "openai", "scripted", "human"])), "model": draw(TEXT)},
        "steps": [draw(steps(i + 1)) for i in range(count)],
        "patch": draw(TEXT),
        "termination": draw(st.sampled_from(["submitted", "max_steps", "timeout", "error", ""])),
        "source": draw(st.sampled_from(["online", "offline", "distilled", "imported"])),
        "created_at": draw(TIMES.map(format_time)),
    }
    if draw(st.booleans()):
        record["final_reward"] = draw(CLAIMED_NUMBERS)  # a claim: it comes back under "claimed"
    return record


def no_nuls(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [no_nuls(v) for v in value]
    if isinstance(value, dict):
        return {no_nuls(k): no_nuls(v) for k, v in value.items()}
    return value


def import_bytes(data: bytes) -> services.TrajectoryImportResult:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "in.jsonl"
        path.write_bytes(data)
        return import_trajectories(path, allow_unknown_tasks=True)


@settings(BOUNDED, max_examples=20)
@given(st.lists(records(), min_size=1, max_size=3, unique_by=lambda r: r["trajectory_id"]))
def test_any_valid_record_imports_and_exports_with_the_same_fields(given_records: list[dict[str, Any]]) -> None:
    with transaction.atomic():
        result = import_bytes(b"".join(orjson.dumps(r) + b"\n" for r in given_records))
        assert result.created == len(given_records)
        exported = {e["trajectory_id"]: e for e in map(orjson.loads, iter_trajectory_lines())}
        for original in map(no_nuls, given_records):
            back = exported[original["trajectory_id"]]
            for key, value in original.items():
                if key == "final_reward":
                    assert back["claimed"]["final_reward"] == value and back["final_reward"] is None
                elif key == "steps":
                    assert len(back["steps"]) == len(value)
                    for mine, theirs in zip(value, back["steps"], strict=True):
                        assert {k: theirs[k] for k in mine} == mine
                else:
                    assert back[key] == value, (key, back[key], value)
        transaction.set_rollback(True)


def corrupt(record: dict[str, Any], how: str, garbage: bytes) -> bytes:
    """One line of a file, broken in the way `how` names."""
    broken = dict(record)
    if how == "truncated":
        line = orjson.dumps(record)
        return line[: max(1, len(line) // 2)]
    if how == "garbage":
        return garbage
    if how == "not an object":
        return orjson.dumps([record])
    if how == "no task_id":
        broken.pop("task_id")
    elif how == "task_id not a string":
        broken["task_id"] = 7
    elif how == "bad uuid":
        broken["trajectory_id"] = "not-a-uuid"
    elif how == "future schema":
        broken["schema_version"] = 2
    elif how == "unknown termination":
        broken["termination"] = "exploded"
    elif how == "steps not a list":
        broken["steps"] = "read everything"
    elif how == "unknown action":
        broken["steps"] = [*record["steps"], {"step": 99, "action_type": "rm_rf", "action_input": "/"}]
    elif how == "repeated step number":
        broken["steps"] = [*record["steps"], {"step": 1, "action_type": "submit"}, {"step": 1, "action_type": "submit"}]
    elif how == "exit code not an integer":
        broken["steps"] = [{"step": 1, "action_type": "submit", "exit_code": "0"}]
    elif how == "bad time":
        broken["created_at"] = "yesterday"
    return orjson.dumps(broken)


HOW = [
    "truncated",
    "garbage",
    "not an object",
    "no task_id",
    "task_id not a string",
    "bad uuid",
    "future schema",
    "unknown termination",
    "steps not a list",
    "unknown action",
    "repeated step number",
    "exit code not an integer",
    "bad time",
]


@settings(BOUNDED, max_examples=30)
@given(
    st.lists(records(), min_size=1, max_size=4, unique_by=lambda r: r["trajectory_id"]),
    st.data(),
    st.sampled_from(HOW),
    st.binary(min_size=1, max_size=60).filter(lambda b: b"\n" not in b and b.strip() != b""),
)
def test_any_corrupted_line_is_refused_naming_its_line_and_nothing_is_stored(
    given_records: list[dict[str, Any]], data: st.DataObject, how: str, garbage: bytes
) -> None:
    at = data.draw(st.integers(0, len(given_records) - 1), label="corrupted record")
    lines = [orjson.dumps(r) for r in given_records]
    lines[at] = corrupt(given_records[at], how, garbage)
    if how == "garbage":
        try:  # bytes that happen to be a valid record are no corruption
            check_record(orjson.loads(lines[at]), 1, lines[at])
            assume(False)
        except (orjson.JSONDecodeError, RecordError):
            pass
    before = (Trajectory.objects.count(), Step.objects.count())
    # Chunks of one trajectory: the records before the broken line are already written when it is read.
    with transaction.atomic(), mock.patch.object(services, "CHUNK_TRAJECTORIES", 1):
        with pytest.raises(RecordError) as refused:
            import_bytes(b"\n".join(lines) + b"\n")
        assert (Trajectory.objects.count(), Step.objects.count()) == before
        transaction.set_rollback(True)
    message = str(refused.value)
    assert message.startswith(f"line {at + 1}: ") and "\n" not in message, message


@settings(BOUNDED, max_examples=50)
@given(records())
def test_the_generated_records_are_the_guides_format(record: dict[str, Any]) -> None:
    """The strategies above make what check_record accepts (else the properties would test nothing)."""
    line = orjson.dumps(record)
    checked = check_record(orjson.loads(line), 1, line)
    assert checked["trajectory_id"] == uuid.UUID(record["trajectory_id"])
    assert len(checked["steps"]) == len(record["steps"])
