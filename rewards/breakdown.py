"""The reward's breakdown: what went into one score, key by key, as stored and shown.

A `Breakdown` goes into `Score.breakdown`, the `TrajectoryScore.breakdown` column, the
`score_patch --json` report and the trajectory page; every writer and reader names its keys
through these types, so a key cannot be spelled two ways. Plain Python (the trainer scores too).
"""

from __future__ import annotations

from typing import Any, TypedDict


class FilesPart(TypedDict):
    """Where each file of the patch went at admission (rewards.admission)."""

    kept: list[str]
    new_tests_set_aside: list[str]
    protected_set_aside: list[str]
    refused: list[str]
    decoded_from_binary: list[str]


class ProbesPart(TypedDict):
    """The probes planted in the run: counts and reasons, never the probes' names."""

    canaries: int
    twins: int
    integrity_plugin: bool
    not_twinned: dict[str, str]


class ExpectationsPart(TypedDict, total=False):
    """The changed-expectations run (rewards.expectations)."""

    checked: bool
    why: str  # when not checked
    changed: int
    cannot_be_changed: dict[str, str]
    changes: list[dict[str, Any]]


class HeldOutPart(TypedDict):
    calls: int  # calls on inputs near the tests' own (rewards.held_out)


class Breakdown(TypedDict, total=False):
    """One score's parts. Keys are absent when their stage did not run (a patch that does not apply
    has no `tests`); `learned` is added after the verdict by the spec's learned components."""

    files: FilesPart
    applied_with: str | None  # how the patch applied (git apply, patch -p1, ...), None when it did not
    static_unparsed: dict[str, str]  # files whose syntax the static checks could not read, and why
    probes: ProbesPart
    expectations: ExpectationsPart
    held_out: HeldOutPart
    test_run_valid: bool  # the run's results are the tests' own (learned components apply only then)
    outcome: float  # the reward before penalties
    early_termination: float  # the penalty for an episode that ended early
    policies: list[str]  # the spec's flag policies that bounded the reward
    tests: dict[str, str]  # nodeid -> outcome, for FAIL_TO_PASS and PASS_TO_PASS
    duration_ms: float
    learned: dict[str, Any]  # rewards.learned's entry
    script_verifier: dict[str, Any]  # a script verifier's rewards and exit (rewards.script_scoring)
    lang: dict[str, Any]  # a Go or JavaScript task's language and restored runner files (rewards.lang_scoring)
