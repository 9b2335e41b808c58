"""Every name that crosses a boundary, defined once.

Plain Python (no Django): the JSONL schema, the agent loop and a training subprocess use
these too. Model choices, forms, serializers, argparse choices and templates derive from
them through `choices()` and `values()`.
"""

from __future__ import annotations

from enum import StrEnum

from sandbox.names import DEFAULT_BACKEND, ISOLATING_BACKENDS, BackendName

__all__ = [
    "DEFAULT_BACKEND",
    "ISOLATING_BACKENDS",
    "LAUNCHABLE_POLICIES",
    "ActionType",
    "BackendName",
    "CheckpointKind",
    "ComparisonChoice",
    "ComparisonStrategy",
    "JobQueue",
    "LiveGroup",
    "PolicyKind",
    "RunStatus",
    "Split",
    "TaskSource",
    "TrainingKind",
    "Termination",
    "TrajectorySource",
    "TrajectoryStatus",
    "ValidationStatus",
    "choices",
    "values",
]


class ActionType(StrEnum):
    READ_FILE = "read_file"
    WRITE_FILE = "write_file"
    EDIT_FILE = "edit_file"
    RUN_COMMAND = "run_command"
    SEARCH = "search"
    RUN_TESTS = "run_tests"
    SUBMIT = "submit"
    # A policy reply that named no usable tool; still a step (the model is told what was
    # wrong), recorded with the raw reply as its input.
    INVALID = "invalid"


class Termination(StrEnum):
    SUBMITTED = "submitted"
    MAX_STEPS = "max_steps"
    TIMEOUT = "timeout"
    ERROR = "error"


class TrajectorySource(StrEnum):
    ONLINE = "online"
    OFFLINE = "offline"
    DISTILLED = "distilled"
    IMPORTED = "imported"


class PolicyKind(StrEnum):
    SCRIPTED = "scripted"
    HF = "hf"
    OPENAI = "openai"
    REPLAY = "replay"
    HUMAN = "human"


# The policies a rollout batch can be launched with (replay and human only record).
LAUNCHABLE_POLICIES = (PolicyKind.SCRIPTED, PolicyKind.HF, PolicyKind.OPENAI)


class TrajectoryStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"


class RunStatus(StrEnum):
    """Long work as a row: batches, validation runs and (later) training and eval runs."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Split(StrEnum):
    TRAIN = "train"
    EVAL = "eval"
    ADVERSARIAL = "adversarial"


class TaskSource(StrEnum):
    HANDWRITTEN = "handwritten"
    ISSUE_PR = "issue_pr"
    GIT_HISTORY = "git_history"
    SYNTHETIC_MUTATION = "synthetic_mutation"
    ERROR_LOG = "error_log"


class ValidationStatus(StrEnum):
    UNVALIDATED = "unvalidated"
    VALID = "valid"
    FLAKY = "flaky"
    INVALID = "invalid"


class JobQueue(StrEnum):
    """Celery queues: rollouts and rewards can run on other hosts than the web server."""

    DEFAULT = "default"
    ROLLOUTS = "rollouts"
    REWARDS = "rewards"
    # Training runs go to GPU hosts in a fleet; a worker that should train consumes it.
    TRAINING = "training"


class LiveGroup(StrEnum):
    """The kinds of live group; a group's name is `<kind>-<id>` (see core.live)."""

    TRAJECTORY = "trajectory"
    BATCH = "batch"
    VALIDATION = "validation"
    RUN = "run"  # a training run
    EVAL = "eval"  # an evaluation run


class ComparisonStrategy(StrEnum):
    """How a comparison set draws its pairs of patches for one task."""

    RANDOM = "random"
    # Both patches got the same verified test outcome: tests cannot decide between them,
    # which is exactly where a reward model needs people's judgement.
    SAME_OUTCOME = "same_outcome"
    CLOSE_REWARD = "close_reward"
    # One patch from each side of an A-vs-B comparison (two policies or checkpoints).
    CHECKPOINTS = "checkpoints"


class ComparisonChoice(StrEnum):
    """A reviewer's verdict on a pair, always in the pair's own A/B terms (not screen sides)."""

    A = "A"
    B = "B"
    TIE = "tie"
    BOTH_BAD = "both_bad"


class TrainingKind(StrEnum):
    SFT = "sft"
    REWARD = "reward"
    DPO = "dpo"
    GRPO = "grpo"


class CheckpointKind(StrEnum):
    POLICY = "policy"  # a causal LM: usable as the hf policy
    REWARD = "reward"  # a sequence-classification reward model


def choices(enum: type[StrEnum]) -> list[tuple[str, str]]:
    """Model/form choices with the labels Django's TextChoices would give the same names."""
    return [(member.value, member.name.replace("_", " ").title()) for member in enum]


def values(enum: type[StrEnum] | tuple[StrEnum, ...]) -> list[str]:
    return [member.value for member in enum]
