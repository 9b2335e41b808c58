"""The columns of the Parquet and Hugging Face exports: one explicit Arrow schema per record shape.

Explicit, so every row group and shard has the same types whatever its rows hold. A value that
JSON allows to be of several types (a step's action_input: a string or an object; policy,
sandbox, flags, unknown keys) is a JSON text column, which Arrow can hold and any reader can
decode. pyarrow is imported inside the functions: only these formats need it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from annotation.preferences import TOOLS_JSON, parquet_schema
from webapp.export_formats import json_text


def _message_type() -> Any:
    return parquet_schema().field("prompt").type


def trajectory_schema() -> Any:
    import pyarrow as pa

    step = pa.struct(
        [
            ("step", pa.int64()),
            ("action_type", pa.string()),
            ("action_input", pa.string()),  # JSON text: a string or an object, as recorded
            ("observation", pa.string()),
            ("observation_truncated", pa.bool_()),
            ("thought", pa.string()),
            ("reward", pa.float64()),
            ("reward_breakdown", pa.string()),
            ("timestamp", pa.string()),
            ("duration_ms", pa.float64()),
            ("exit_code", pa.int64()),
            ("extra", pa.string()),
        ]
    )
    text = pa.string()
    return pa.schema(
        [
            ("schema_version", pa.int64()),
            ("trajectory_id", text),
            ("task_id", text),
            ("task_version", text),
            ("base_commit", text),
            ("prompt", text),
            ("policy", text),
            ("sandbox", text),
            ("steps", pa.list_(step)),
            ("patch", text),
            ("final_reward", pa.float64()),
            ("success", pa.bool_()),
            ("termination", text),
            ("flags", text),
            ("source", text),
            ("created_at", text),
            ("claimed", text),
            ("extra", text),
        ]
    )


TRAJECTORY_JSON = ("policy", "sandbox", "flags", "claimed")
STEP_KEYS = ("step", "action_type", "observation", "observation_truncated", "thought", "reward", "timestamp")
STEP_KEYS_MORE = ("duration_ms", "exit_code")


def trajectory_columns(record: dict[str, Any]) -> dict[str, Any]:
    known = set(trajectory_schema_names())
    out = {k: record.get(k) for k in known if k not in TRAJECTORY_JSON and k not in ("steps", "extra")}
    for key in TRAJECTORY_JSON:
        out[key] = json_text(record.get(key))
    out["extra"] = json_text({k: v for k, v in record.items() if k not in known} or None)
    out["steps"] = [_step_columns(step) for step in record["steps"]]
    return out


def _step_columns(step: dict[str, Any]) -> dict[str, Any]:
    out = {k: step.get(k) for k in (*STEP_KEYS, *STEP_KEYS_MORE)}
    out["action_input"] = json_text(step.get("action_input"))
    out["reward_breakdown"] = json_text(step.get("reward_breakdown"))
    rest = {k: v for k, v in step.items() if k not in out}
    out["extra"] = json_text(rest or None)
    return out


@cache
def trajectory_schema_names() -> tuple[str, ...]:
    return tuple(trajectory_schema().names)


TASK_TEXT = ("task_id", "suite", "statement", "expected_patch", "version", "snapshot_hash", "tests_hash")
TASK_TEXT_MORE = ("tests_dest", "test_command", "validation_status", "repo", "base_commit")


def task_schema() -> Any:
    import pyarrow as pa

    fields = [(name, pa.string()) for name in (*TASK_TEXT, *TASK_TEXT_MORE)]
    fields += [("fail_to_pass", pa.list_(pa.string())), ("pass_to_pass", pa.list_(pa.string()))]
    fields += [(name, pa.string()) for name in ("validation_report", "hidden_tests", "metadata")]
    return pa.schema(fields)


def task_columns(record: dict[str, Any]) -> dict[str, Any]:
    out = {name: record.get(name) for name in (*TASK_TEXT, *TASK_TEXT_MORE, "fail_to_pass", "pass_to_pass")}
    out["validation_report"] = json_text(record.get("validation_report"))
    out["hidden_tests"] = json_text(record.get("hidden_tests"))
    out["metadata"] = json_text({k: v for k, v in record.items() if k not in out} or None)
    return out


def sft_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("messages", _message_type()),
            ("tools", pa.string()),
            ("trajectory_id", pa.string()),
            ("task_id", pa.string()),
            ("final_reward", pa.float64()),
            ("success", pa.bool_()),
        ]
    )


def sft_columns(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "tools": TOOLS_JSON}
