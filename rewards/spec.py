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
    for section in ("outcome", "process", "anticheat"):
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
    return RewardSpec(
        name=name,
        outcome=outcome,
        process=process,
        negative_value=_number(merged["anticheat"], "negative_value", "anticheat"),
        policies=dict(policies),
        raw=merged,
    )


def load_spec(path: Path | None = None) -> RewardSpec:
    source = path or DEFAULT_SPEC_PATH
    try:
        data = yaml.safe_load(source.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SpecError(f"{source}: {exc}") from None
    return parse_spec(data)
