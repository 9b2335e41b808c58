"""What every foreign trajectory format is turned into: a trajectory record (trajectories.schema).

Plain Python. A converter reads one file's JSON and returns the record the JSONL import
takes, so every foreign trajectory passes the same checks, the same all-or-nothing
transaction and the same duplicate rule as Crucible's own files. Foreign files are hostile:
a field of the wrong type is a one-line error naming the file and the field.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import uuid
from typing import Any

from core.vocabulary import ActionType, Termination, TrajectorySource

# Derived from the file's bytes, so importing the same file twice adds nothing.
INTERCHANGE_NAMESPACE = uuid.UUID("0b8f3c1e-6a2d-5e4f-8c7b-1d2e3f405162")
# Commands that only read one file: shown as read_file steps, which the page renders as such.
READ_COMMANDS = frozenset({"open", "cat"})
SEARCH_COMMANDS = frozenset({"search_dir", "search_file", "find_file", "grep", "rg"})


class InterchangeError(ValueError):
    """A foreign trajectory file that cannot be imported; the message names the file."""


def trajectory_id(fmt: str, content: bytes) -> str:
    return str(uuid.uuid5(INTERCHANGE_NAMESPACE, f"{fmt}:{hashlib.sha256(content).hexdigest()}"))


def text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InterchangeError(f"{where} must be a string")
    return value


def mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InterchangeError(f"{where} must be an object")
    return value


def sequence(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InterchangeError(f"{where} must be a list")
    return value


def shell_step(command: str) -> tuple[str, Any]:
    """An action type and input for a shell command: reads and searches named as such, the rest run_command.

    The command is kept whole in run_command: it is what the agent ran, and replay or review
    must see it exactly.
    """
    stripped = command.strip()
    if not stripped:
        return ActionType.INVALID, command
    try:
        words = shlex.split(stripped)
    except ValueError:
        words = []
    if words == ["submit"]:
        return ActionType.SUBMIT, None
    if len(words) == 2 and words[0] in READ_COMMANDS and "\n" not in stripped:
        return ActionType.READ_FILE, {"path": words[1]}
    if len(words) == 3 and words[:2] == ["str_replace_editor", "view"]:
        return ActionType.READ_FILE, {"path": words[2]}
    if len(words) >= 2 and words[0] in SEARCH_COMMANDS and "\n" not in stripped and not re.search(r"[|;&<>]", stripped):
        return ActionType.SEARCH, {"pattern": words[1]}
    return ActionType.RUN_COMMAND, {"command": command}


def record(
    *,
    fmt: str,
    content: bytes,
    task_id: str,
    prompt: str,
    model: str,
    steps: list[dict[str, Any]],
    patch: str,
    termination: str,
    info: dict[str, Any],
) -> dict[str, Any]:
    """The trajectory record. No outcome: a foreign file's exit status is not a reward, and
    rewards appear only when Crucible scores the patch (the claimed/verified rule)."""
    if termination not in {*Termination, ""}:
        termination = Termination.ERROR
    return {
        "schema_version": 1,
        "trajectory_id": trajectory_id(fmt, content),
        "task_id": task_id,
        "prompt": prompt,
        "policy": {"kind": fmt, "model": model},
        "steps": steps,
        "patch": patch,
        "termination": termination,
        "source": TrajectorySource.IMPORTED,
        # Kept as unknown keys (exported back as they are): where the trajectory came from.
        "imported_from": {"format": fmt, "info": info},
    }
