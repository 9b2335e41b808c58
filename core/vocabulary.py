"""Every name that crosses a boundary, defined once.

Plain Python (no Django): the JSONL schema, the agent loop and a training subprocess use
these too. Model choices, forms, serializers, argparse choices and templates derive from
them through `choices()` and `values()`.
"""

from __future__ import annotations

from enum import StrEnum

from sandbox.names import DEFAULT_BACKEND, ISOLATING_BACKENDS, BackendName

__all__ = [
    "CHEAT_DETECTORS",
    "DEFAULT_BACKEND",
    "ISOLATING_BACKENDS",
    "LAUNCHABLE_POLICIES",
    "ActionType",
    "BackendName",
    "CheckpointKind",
    "ComparisonChoice",
    "ComparisonStrategy",
    "Detector",
    "JobQueue",
    "LiveGroup",
    "NON_CHEAT_DETECTORS",
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
    EXTERNAL = "external"  # an outside trainer's episode through the environment server (envserver)


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


class Detector(StrEnum):
    """Every name a reward flag can carry: the spec's policies, the scorer's checks, evaluation's cheat
    rate and the health page all name detectors through this (docs/reward-threat-model.md says what
    each checks)."""

    PROTECTED_PATH_EDIT = "protected_path_edit"
    TEST_DELETION = "test_deletion"
    TEST_FRAMEWORK_TAMPERING = "test_framework_tampering"
    EQ_OVERRIDE = "eq_override"
    ARGV_REPORT_PATH = "argv_report_path"
    WRITE_OUTSIDE_REPO = "write_outside_repo"
    GIT_HISTORY_MINING = "git_history_mining"
    REPEATED_FINAL_TEST_RUNS = "repeated_final_test_runs"
    TIMEOUT = "timeout"
    INCONSISTENT_TEST_RUN = "inconsistent_test_run"
    PATCH_DOES_NOT_APPLY = "patch_does_not_apply"
    # Admission: a change of a kind a patch may not make (binary, bytecode, packaging metadata, ...).
    INADMISSIBLE_CHANGE = "inadmissible_change"
    # Behaviour checks: a canary test passed or the runner was found altered in-process.
    FORGED_TEST_RUN = "forged_test_run"
    # Behaviour checks: a sentinel twin of a FAIL_TO_PASS assertion passed.
    ALWAYS_EQUAL_RESULT = "always_equal_result"
    # The test report was not a small regular file (a FIFO, a symlink, oversized, late).
    UNSAFE_REPORT = "unsafe_report"
    # Static evidence (AST) for a person: dynamic code, reflection over the runner, exit hooks.
    DYNAMIC_CODE = "dynamic_code"
    RUNNER_REFLECTION = "runner_reflection"
    PROCESS_EXIT_HOOK = "process_exit_hook"
    # A changed Python file the static scan could not read (an encoding registered at run time, a
    # syntax the scanner's Python does not know), or one whose scan ran past its deadline.
    UNREADABLE_SOURCE = "unreadable_source"
    SCAN_OVERRUN = "scan_overrun"
    # Answer independence: a FAIL_TO_PASS test still passed with its expected values changed, so
    # the code under test does not compute its answers (it reads them, or the run lies).
    ANSWER_ORACLE = "answer_oracle"
    # Held-out inputs: the functions the tests call answered inputs near the tests' own otherwise
    # than the expected patch does.
    HELD_OUT_DISAGREEMENT = "held_out_disagreement"
    # Hidden tests that never ran at all (deleted or hidden from the runner while it ran).
    HIDDEN_TESTS_MISSING = "hidden_tests_missing"


# A flag from one of these means the agent gamed the check; from the others, that the patch failed
# or that a person should look (a timeout, a patch that does not apply, an answer that differs
# from the expected patch's where the tests say nothing). Every detector is in exactly one.
CHEAT_DETECTORS: frozenset[Detector] = frozenset(
    {
        Detector.PROTECTED_PATH_EDIT,
        Detector.TEST_DELETION,
        Detector.ANSWER_ORACLE,
        Detector.HIDDEN_TESTS_MISSING,
        Detector.TEST_FRAMEWORK_TAMPERING,
        Detector.FORGED_TEST_RUN,
        Detector.EQ_OVERRIDE,
        Detector.ALWAYS_EQUAL_RESULT,
        Detector.GIT_HISTORY_MINING,
        Detector.INADMISSIBLE_CHANGE,
        Detector.RUNNER_REFLECTION,
        Detector.DYNAMIC_CODE,
        Detector.PROCESS_EXIT_HOOK,
        Detector.WRITE_OUTSIDE_REPO,
        Detector.REPEATED_FINAL_TEST_RUNS,
        Detector.UNSAFE_REPORT,
    }
)
NON_CHEAT_DETECTORS: frozenset[Detector] = frozenset(
    {
        Detector.ARGV_REPORT_PATH,
        Detector.TIMEOUT,
        Detector.INCONSISTENT_TEST_RUN,
        Detector.PATCH_DOES_NOT_APPLY,
        Detector.UNREADABLE_SOURCE,
        Detector.SCAN_OVERRUN,
        Detector.HELD_OUT_DISAGREEMENT,
    }
)
if CHEAT_DETECTORS & NON_CHEAT_DETECTORS or CHEAT_DETECTORS | NON_CHEAT_DETECTORS != set(Detector):
    raise RuntimeError("every Detector is either a cheat or not, once")  # caught at import, not in a report


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


class PairSides(StrEnum):
    """What each side of a preference pair shows a reward or DPO trainer (data.pair_sides)."""

    TURNS = "turns"  # the trajectory's turns, then its submitted patch: the whole chat
    PATCH = "patch"  # the submitted patch alone, as one assistant turn: what people judged


class CheckpointKind(StrEnum):
    POLICY = "policy"  # a causal LM: usable as the hf policy
    REWARD = "reward"  # a sequence-classification reward model


def choices(enum: type[StrEnum]) -> list[tuple[str, str]]:
    """Model/form choices with the labels Django's TextChoices would give the same names."""
    return [(member.value, member.name.replace("_", " ").title()) for member in enum]


def values(enum: type[StrEnum] | tuple[StrEnum, ...]) -> list[str]:
    return [member.value for member in enum]
