"""The reward spec: weights and anti-cheat policies, from YAML, versioned by content."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_SPEC_PATH = Path(__file__).with_name("default_spec.yaml")
POLICIES = ("zero", "negative", "review")
DETECTORS = (
    "protected_path_edit",
    "test_deletion",
    "test_framework_tampering",
    "eq_override",
    "argv_report_path",
    "write_outside_repo",
    "git_history_mining",
    "repeated_final_test_runs",
    "timeout",
    "inconsistent_test_run",
    "patch_does_not_apply",
    # Admission: a change of a kind a patch may not make (binary, bytecode, packaging metadata, ...).
    "inadmissible_change",
    # Behaviour checks: a canary test passed or the runner was found altered in-process.
    "forged_test_run",
    # Behaviour checks: a sentinel twin of a FAIL_TO_PASS assertion passed.
    "always_equal_result",
    # The test report was not a small regular file (a FIFO, a symlink, oversized, late).
    "unsafe_report",
    # Static evidence (AST) for a person: dynamic code, reflection over the runner, exit hooks.
    "dynamic_code",
    "runner_reflection",
    "process_exit_hook",
)
# What admission can refuse (DESIGN "Rewards"); the spec's `admission.refuse` picks from these.
ADMISSION_RULES = (
    "binary",  # binary hunks (a binary file that decodes as UTF-8 text is judged as text instead)
    "bytecode",  # *.pyc, *.pyo, __pycache__/
    "packaging_metadata",  # *.dist-info, *.egg-info, entry_points.txt, *.pth
    "vcs_config",  # .gitignore, .gitattributes, .gitmodules
    "symlink_outside",  # symlinks whose target leaves the tree
    "mode_change",  # executable-bit changes
)


class SpecError(ValueError):
    pass


@dataclass(frozen=True)
class RewardSpec:
    name: str
    outcome: dict[str, float]
    process: dict[str, Any]
    negative_value: float
    policies: dict[str, str]
    admission: frozenset[str] = frozenset(ADMISSION_RULES)
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @property
    def version(self) -> str:
        canonical = json.dumps(self.raw, sort_keys=True, separators=(",", ":"))
        return f"{self.name}@{hashlib.sha256(canonical.encode()).hexdigest()[:12]}"

    def policy(self, detector: str) -> str:
        return self.policies.get(detector, "review")


def _number(section: dict[str, Any], key: str, where: str) -> float:
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(f"{where}.{key} must be a number")
    return float(value)


def parse_spec(data: Any) -> RewardSpec:
    """Check a spec (merged over the defaults) and build it; errors name the field."""
    if not isinstance(data, dict):
        raise SpecError("a reward spec must be a mapping")
    defaults = yaml.safe_load(DEFAULT_SPEC_PATH.read_text())
    merged: dict[str, Any] = {**defaults, **data}
    for section in ("outcome", "process", "anticheat", "admission"):
        given = data.get(section, {})
        if not isinstance(given, dict):
            raise SpecError(f"{section} must be a mapping")
        merged[section] = {**defaults[section], **given}
    merged["anticheat"]["policies"] = {
        **defaults["anticheat"]["policies"],
        **data.get("anticheat", {}).get("policies", {}),
    }
    name = merged.get("name")
    if not isinstance(name, str) or not name:
        raise SpecError("name must be a non-empty string")
    outcome = {k: _number(merged["outcome"], k, "outcome") for k in defaults["outcome"]}
    process: dict[str, Any] = {k: _number(merged["process"], k, "process") for k in defaults["process"] if k != "clip"}
    clip = merged["process"].get("clip")
    if not (
        isinstance(clip, list)
        and len(clip) == 2
        and all(isinstance(c, int | float) for c in clip)
        and clip[0] < clip[1]
    ):
        raise SpecError("process.clip must be [low, high] with low < high")
    process["clip"] = (float(clip[0]), float(clip[1]))
    process["no_change_steps"] = int(process["no_change_steps"])
    policies = merged["anticheat"]["policies"]
    for detector, policy in policies.items():
        if detector not in DETECTORS:
            raise SpecError(f"anticheat.policies.{detector}: unknown detector (known: {', '.join(DETECTORS)})")
        if policy not in POLICIES:
            raise SpecError(f"anticheat.policies.{detector} must be one of {', '.join(POLICIES)}")
    refuse = merged["admission"].get("refuse")
    if not isinstance(refuse, list) or not all(isinstance(rule, str) for rule in refuse):
        raise SpecError("admission.refuse must be a list of rule names")
    unknown = sorted(set(refuse) - set(ADMISSION_RULES))
    if unknown:
        raise SpecError(f"admission.refuse: unknown rule {unknown[0]!r} (known: {', '.join(ADMISSION_RULES)})")
    return RewardSpec(
        name=name,
        outcome=outcome,
        process=process,
        negative_value=_number(merged["anticheat"], "negative_value", "anticheat"),
        policies=dict(policies),
        admission=frozenset(refuse),
        raw=merged,
    )


def load_spec(path: Path | None = None) -> RewardSpec:
    source = path or DEFAULT_SPEC_PATH
    try:
        data = yaml.safe_load(source.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SpecError(f"{source}: {exc}") from None
    return parse_spec(data)
