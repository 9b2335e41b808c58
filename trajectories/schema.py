"""The trajectory JSONL record (docs/formats.md): checking one record and writing one back.

Plain Python, no Django: a trainer or a remote worker can read and write the format
with the same rules. Every error names the line and the field, since records come
from agents and other tools and are treated as hostile.

Claimed and verified outcomes: a record's `final_reward`, `success` and `flags` are what
Crucible's reward service computed, or null / [] while it has not scored the trajectory.
What an imported file says about its own outcome is a claim: the import keeps it as
`claimed` ({"final_reward", "success", "flags"}), never as the outcome, and the export
writes it back under the `claimed` key (only when there is one), so that importing our
own export gives the same store. A record whose top-level outcome is set claims that
outcome (another instance's verified reward is a claim here too); otherwise its `claimed`
object, if any, is the claim.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

import orjson

from core.limits import TASK_ID_MAX
from core.vocabulary import ActionType, Termination, TrajectorySource, values

SCHEMA_VERSION = 1
ACTION_TYPES = frozenset(values(ActionType))
# An empty termination is a record that does not say how it ended (older tools).
TERMINATIONS = frozenset({*values(Termination), ""})
SOURCES = frozenset(values(TrajectorySource))
# Fixed namespace: a record without a trajectory_id gets the same id every time it
# is imported, which is what makes re-importing a file add nothing.
ID_NAMESPACE = uuid.UUID("6f1c7d0e-3b1a-5c44-9a53-8a4f0f0c1e2d")
# The key of a step's harness test counts (HarnessTests) in its `extra`. Only Crucible's own
# recorder writes it: the same key in an imported file is kept as CLAIMED_HARNESS_TESTS.
HARNESS_TESTS = "harness_tests"
CLAIMED_HARNESS_TESTS = "claimed_harness_tests"

TOP_KEYS = frozenset(
    {
        "schema_version",
        "trajectory_id",
        "task_id",
        "task_version",
        "base_commit",
        "prompt",
        "policy",
        "sandbox",
        "steps",
        "patch",
        "final_reward",
        "success",
        "termination",
        "flags",
        "source",
        "created_at",
        "claimed",
    }
)
CLAIMED_KEYS = ("final_reward", "success", "flags")
STEP_KEYS = frozenset(
    {
        "step",
        "action_type",
        "action_input",
        "observation",
        "observation_truncated",
        "thought",
        "reward",
        "reward_breakdown",
        "timestamp",
        "duration_ms",
        "exit_code",
    }
)


# What each action type's action_input may be. Tool form: the arguments of the agent's tool
# (trajectories.tools.TOOLS), which is what Crucible records and what replay re-runs. Shorthand
# form (docs/formats.md): a bare string naming the primary argument, and edit_file as {"file", "patch"};
# accepted so minimal records written by hand import as they are, though replay cannot re-run a
# {"file", "patch"} edit (no tool takes a patch). Extra keys are tolerated: a model that adds
# one still made the call the tool ran.
ACTION_FORMS: dict[str, tuple[tuple[str, ...], ...]] = {
    ActionType.READ_FILE: (("path",),),
    ActionType.WRITE_FILE: (("path", "content"),),
    ActionType.EDIT_FILE: (("path", "old_text", "new_text"), ("file", "patch")),
    ActionType.RUN_COMMAND: (("command",),),
    ActionType.SEARCH: (("pattern",), ("symbol",)),
    ActionType.RUN_TESTS: ((),),
    ActionType.SUBMIT: ((),),
}
# Action types whose shorthand form is a bare string (the primary argument, or a test target).
STRING_FORMS = frozenset(
    {ActionType.READ_FILE, ActionType.RUN_COMMAND, ActionType.SEARCH, ActionType.RUN_TESTS, ActionType.SUBMIT}
)
# Action types that may come with no input at all.
EMPTY_FORMS = frozenset({ActionType.RUN_TESTS, ActionType.SUBMIT})


def action_input_error(action_type: str, action_input: Any) -> str | None:
    """Why an action_input does not fit its action type (the field, then the rule), or None.

    The agent loop records a call that fails this as an `invalid` step, so everything
    Crucible records passes the import's check.
    """
    if action_type == ActionType.INVALID:
        return None if action_input is None or isinstance(action_input, (str, dict, list)) else " must be a string"
    if action_input is None:
        return None if action_type in EMPTY_FORMS else f" is required for {action_type}"
    if isinstance(action_input, str):
        if action_type in STRING_FORMS:
            return None
        return f" of {action_type} must be an object with {_shapes(action_type)}"
    if not isinstance(action_input, dict):
        return f" of {action_type} must be an object with {_shapes(action_type)}"
    if action_type == ActionType.RUN_TESTS:
        paths = action_input.get("paths")
        if paths is not None and not (isinstance(paths, list) and all(isinstance(p, str) for p in paths)):
            return ".paths must be a list of strings"
        return None
    forms = ACTION_FORMS[action_type]
    # The form whose first key is present decides which fields are required.
    form = next((f for f in forms if f and f[0] in action_input), forms[0])
    for key in form:
        if key not in action_input:
            return f".{key} is missing ({action_type} takes {_shapes(action_type)})"
        if not isinstance(action_input[key], str):
            return f".{key} must be a string"
    return None


def _shapes(action_type: str) -> str:
    return " or ".join("{" + ", ".join(f'"{k}"' for k in form) + "}" for form in ACTION_FORMS[action_type])


class StepFields(TypedDict):
    step: int
    action_type: str  # an ActionType value
    # A string or an object, as recorded (shorthand records keep a bare string).
    action_input: Any
    observation: str
    observation_truncated: bool
    thought: str
    timestamp: datetime | None
    duration_ms: float | None
    exit_code: int | None


class HarnessTests(TypedDict):
    """What the harness's own test run (the run_tests tool) read from its report.

    Process rewards count failing tests from these alone: anything an agent's command
    prints ("40 failed") is text it chose. Stored in a step's `extra` under HARNESS_TESTS.
    Tests are named by short hashes of their node ids (hash_test_id), which keeps a
    step small and is all that telling "this test failed before and passes now" needs.
    """

    passed: int
    failed: int
    errors: int
    skipped: int
    collected: int
    valid: bool  # exit code, report and pytest's summary agreed
    failed_ids: list[str]  # failed or errored
    passed_ids: list[str]
    ids_complete: bool  # false when a run had more tests than a step keeps ids of


class ModelCall(TypedDict):
    """What a model policy (hf, openai) did for one step: kept in the step's `extra` under MODEL_CALL.

    The transcript view and the batch page's speed figures read exactly these keys.
    """

    raw: str  # the model's raw output, bounded (MODEL_RAW_MAX)
    prompt_tokens: int | None
    completion_tokens: int | None
    generate_ms: float  # the generation itself (hf) or the request (openai)
    tokens_per_s: float | None  # completion tokens over generate_ms
    # What the server sampled, where it said (trajectories.policies.sampled): the episodes export
    # uses them instead of tokenizing the text again.
    prompt_token_ids: NotRequired[list[int]]
    completion_token_ids: NotRequired[list[int]]
    logprobs: NotRequired[list[float]]
    # The server's `system_fingerprint`, where it sent a plain one: which weights answered. A GRPO
    # run's policy server names its policy version in it (training.trainers.policy_server).
    system_fingerprint: NotRequired[str]


MODEL_CALL = "model"
MODEL_RAW_MAX = 8000


class AgentStep(StepFields):
    """One step as the agent loop hands it to a recorder."""

    policy_ms: float  # the policy's share of duration_ms
    harness_tests: NotRequired[HarnessTests]  # only on run_tests steps
    model: NotRequired[ModelCall]  # only for model policies


class StepRecord(StepFields):
    """One checked step of a trajectory record: what the import stores and the recorder writes."""

    reward: float | None
    reward_breakdown: dict[str, Any]
    extra: dict[str, Any]  # keys this schema does not know, kept for the export


class ClaimedOutcome(TypedDict):
    """What an imported record said about its own outcome: stored and shown, never trusted."""

    final_reward: float | None
    success: bool | None
    flags: list[Any]


class RecordError(ValueError):
    def __init__(self, lineno: int, message: str) -> None:
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


def parse_time(value: Any, lineno: int, where: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise RecordError(lineno, f"{where} must be an ISO-8601 string")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise RecordError(lineno, f"{where} {value[:40]!r} is not an ISO-8601 time") from None
    # A naive time is taken as UTC, which is what minimal records without a zone mean.
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def format_time(value: datetime | None) -> str | None:
    if value is None:
        return None
    value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}"
    return text + "Z"


def _number(value: Any, lineno: int, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordError(lineno, f"{where} must be a number or null")
    return float(value)


def _string(value: Any, lineno: int, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RecordError(lineno, f"{where} must be a string")
    return value


def _object(value: Any, lineno: int, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecordError(lineno, f"{where} must be an object")
    return value


def check_step(raw: Any, index: int, lineno: int) -> StepRecord:
    where = f"steps[{index}]"
    if not isinstance(raw, dict):
        raise RecordError(lineno, f"{where} must be an object")
    number = raw.get("step", index + 1)
    if isinstance(number, bool) or not isinstance(number, int) or number < 0:
        raise RecordError(lineno, f"{where}.step must be a non-negative integer")
    action_type = raw.get("action_type")
    if action_type not in ACTION_TYPES:
        raise RecordError(
            lineno, f"{where}.action_type {str(action_type)[:40]!r} is not one of {', '.join(sorted(ACTION_TYPES))}"
        )
    exit_code = raw.get("exit_code")
    if exit_code is not None and (isinstance(exit_code, bool) or not isinstance(exit_code, int)):
        raise RecordError(lineno, f"{where}.exit_code must be an integer or null")
    truncated = raw.get("observation_truncated", False)
    if not isinstance(truncated, bool):
        raise RecordError(lineno, f"{where}.observation_truncated must be true or false")
    action_input = raw.get("action_input")
    if not (action_input is None or isinstance(action_input, (str, dict, list))):
        raise RecordError(lineno, f"{where}.action_input must be a string, an object or a list")
    record: StepRecord = {
        "step": number,
        "action_type": str(action_type),
        "action_input": action_input,
        "observation": _string(raw.get("observation"), lineno, f"{where}.observation"),
        "observation_truncated": truncated,
        "thought": _string(raw.get("thought"), lineno, f"{where}.thought"),
        "reward": _number(raw.get("reward"), lineno, f"{where}.reward"),
        "reward_breakdown": _object(raw.get("reward_breakdown"), lineno, f"{where}.reward_breakdown"),
        "timestamp": parse_time(raw.get("timestamp"), lineno, f"{where}.timestamp"),
        "duration_ms": _number(raw.get("duration_ms"), lineno, f"{where}.duration_ms"),
        "exit_code": exit_code,
        "extra": _step_extra(raw),
    }
    # Checked last, so a record with several faults names the simplest one first.
    problem = action_input_error(record["action_type"], action_input)
    if problem is not None:
        raise RecordError(lineno, f"{where} (step {number}): action_input{problem}")
    return record


def hash_test_id(nodeid: str) -> str:
    return hashlib.blake2b(nodeid.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def _step_extra(raw: dict[str, Any]) -> dict[str, Any]:
    extra = {k: v for k, v in raw.items() if k not in STEP_KEYS}
    if HARNESS_TESTS in extra:
        # A file can say anything about its test runs; process rewards trust only our recorder.
        extra[CLAIMED_HARNESS_TESTS] = extra.pop(HARNESS_TESTS)
    return extra


def check_record(raw: Any, lineno: int, line: bytes) -> dict[str, Any]:
    """Validate one decoded record; returns the trajectory's fields with `steps` checked."""
    if not isinstance(raw, dict):
        raise RecordError(lineno, "a trajectory must be a JSON object")
    task_id = raw.get("task_id")
    if not isinstance(task_id, str) or not task_id or len(task_id) > TASK_ID_MAX:
        raise RecordError(lineno, f"task_id is missing or not a non-empty string (at most {TASK_ID_MAX} characters)")
    version = raw.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise RecordError(lineno, f"schema_version {version!r} is not supported (this is version {SCHEMA_VERSION})")
    raw_id = raw.get("trajectory_id")
    if raw_id is None:
        trajectory_id = uuid.uuid5(ID_NAMESPACE, line.strip().decode("utf-8", "replace"))
    else:
        try:
            trajectory_id = uuid.UUID(str(raw_id))
        except ValueError:
            raise RecordError(lineno, f"trajectory_id {str(raw_id)[:60]!r} is not a UUID") from None
    steps_raw = raw.get("steps", [])
    if not isinstance(steps_raw, list):
        raise RecordError(lineno, "steps must be a list")
    steps = [check_step(s, i, lineno) for i, s in enumerate(steps_raw)]
    numbers = [s["step"] for s in steps]
    if len(set(numbers)) != len(numbers):
        raise RecordError(lineno, "two steps share the same step number")
    termination = _string(raw.get("termination"), lineno, "termination")
    if termination not in TERMINATIONS:
        raise RecordError(
            lineno, f"termination {termination[:40]!r} is not one of {', '.join(sorted(TERMINATIONS - {''}))}"
        )
    source = _string(raw.get("source"), lineno, "source") or TrajectorySource.IMPORTED
    if source not in SOURCES:
        raise RecordError(lineno, f"source {source[:40]!r} is not one of {', '.join(sorted(SOURCES))}")
    claimed = check_claimed(raw, lineno)
    policy = _object(raw.get("policy"), lineno, "policy")
    kind, model = policy.get("kind", ""), policy.get("model", "")
    if not isinstance(kind, str) or not isinstance(model, str):
        raise RecordError(lineno, "policy.kind and policy.model must be strings")
    return {
        "trajectory_id": trajectory_id,
        "schema_version": SCHEMA_VERSION,
        "task_ref": task_id,
        "task_version": _string(raw.get("task_version"), lineno, "task_version")[:80],
        "base_commit": _string(raw.get("base_commit"), lineno, "base_commit")[:64],
        "prompt": _string(raw.get("prompt"), lineno, "prompt"),
        "policy": policy,
        "policy_kind": kind[:32],
        "policy_model": model[:300],
        "sandbox": _object(raw.get("sandbox"), lineno, "sandbox"),
        "patch": _string(raw.get("patch"), lineno, "patch"),
        "termination": termination,
        # The record's outcome is only ever a claim: there is no key here for the verified one.
        "claimed": claimed,
        "source": source,
        "created_at": parse_time(raw.get("created_at"), lineno, "created_at"),
        "extra": {k: v for k, v in raw.items() if k not in TOP_KEYS},
        "steps": steps,
    }


def _outcome(raw: dict[str, Any], lineno: int, where: str) -> ClaimedOutcome:
    success = raw.get("success")
    if success is not None and not isinstance(success, bool):
        raise RecordError(lineno, f"{where}success must be true, false or null")
    flags = raw.get("flags", [])
    if not isinstance(flags, list):
        raise RecordError(lineno, f"{where}flags must be a list")
    return {
        "final_reward": _number(raw.get("final_reward"), lineno, f"{where}final_reward"),
        "success": success,
        "flags": flags,
    }


def check_claimed(raw: dict[str, Any], lineno: int) -> ClaimedOutcome | dict[str, Any]:
    """The outcome a record claims, {} when it claims none (see the module's docstring)."""
    top = _outcome(raw, lineno, "")
    nested: ClaimedOutcome | None = None
    if raw.get("claimed") is not None:
        given = raw["claimed"]
        if not isinstance(given, dict):
            raise RecordError(lineno, "claimed must be an object")
        unknown = sorted(str(k) for k in set(given) - set(CLAIMED_KEYS))
        if unknown:
            raise RecordError(lineno, f"claimed.{unknown[0][:40]} is not one of {', '.join(CLAIMED_KEYS)}")
        nested = _outcome(given, lineno, "claimed.")
    if top["final_reward"] is not None or top["success"] is not None or top["flags"]:
        return top
    if nested is not None and (nested["final_reward"] is not None or nested["success"] is not None or nested["flags"]):
        return nested
    return {}


def record_bytes(trajectory: dict[str, Any], steps: list[dict[str, Any]]) -> bytes:
    """One JSONL line (with its newline) for a stored trajectory and its steps.

    Step timestamps arrive already formatted (the export builds them in SQL) and JSON
    values may be pre-encoded `orjson.Fragment`s.
    """
    out: dict[str, Any] = {
        "schema_version": trajectory["schema_version"],
        "trajectory_id": str(trajectory["trajectory_id"]),
        "task_id": trajectory["task_ref"],
        "task_version": trajectory["task_version"],
        "base_commit": trajectory["base_commit"],
        "prompt": trajectory["prompt"],
        "policy": trajectory["policy"],
        "sandbox": trajectory["sandbox"],
        "steps": [_step_out(s) for s in steps],
        "patch": trajectory["patch"],
        "final_reward": trajectory["final_reward"],
        "success": trajectory["success"],
        "termination": trajectory["termination"],
        "flags": trajectory["flags"],
        "source": trajectory["source"],
        "created_at": format_time(trajectory["created_at"]),
    }
    if trajectory.get("claimed"):
        out["claimed"] = trajectory["claimed"]
    extra = trajectory.get("extra")
    if extra:
        out.update({k: v for k, v in extra.items() if k not in out})
    return orjson.dumps(out) + b"\n"


def _step_out(step: dict[str, Any]) -> dict[str, Any]:
    out = {
        "step": step["step"],
        "action_type": step["action_type"],
        "action_input": step["action_input"],
        "observation": step["observation"],
        "observation_truncated": step["observation_truncated"],
        "thought": step["thought"],
        "reward": step["reward"],
        "reward_breakdown": step["reward_breakdown"],
        "timestamp": step["timestamp"],
        "duration_ms": step["duration_ms"],
        "exit_code": step["exit_code"],
    }
    extra = step.get("extra")
    if extra:
        out.update({k: v for k, v in extra.items() if k not in out})
    return out
