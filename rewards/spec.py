"""The reward spec: weights and anti-cheat policies, from YAML, versioned by content."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.vocabulary import Detector

DEFAULT_SPEC_PATH = Path(__file__).with_name("default_spec.yaml")
POLICIES = ("zero", "negative", "review")
DETECTORS = tuple(Detector)  # what `anticheat.policies` may name
# What admission can refuse; the spec's `admission.refuse` picks from these.
ADMISSION_RULES = (
    "binary",  # binary hunks (a binary file that decodes as UTF-8 text is judged as text instead)
    "bytecode",  # *.pyc, *.pyo, __pycache__/
    "packaging_metadata",  # *.dist-info, *.egg-info, entry_points.txt, *.pth
    "vcs_config",  # .gitignore, .gitattributes, .gitmodules
    "symlink_outside",  # symlinks whose target leaves the tree
    "mode_change",  # executable-bit changes
    "source_encoding",  # Python source in an encoding the scorer does not have (one the patch registers)
)


# A learned (reward-model) component may shift a reward by at most its weight, and all of
# them together by at most this much: the verified outcome always decides most of it.
MAX_LEARNED_WEIGHT = 0.5


class SpecError(ValueError):
    pass


@dataclass(frozen=True)
class LearnedComponent:
    """A reward-model checkpoint (by id or name) whose score shifts the verified reward."""

    checkpoint: str
    weight: float


@dataclass(frozen=True)
class RewardSpec:
    name: str
    outcome: dict[str, float]
    process: dict[str, Any]
    negative_value: float
    policies: dict[str, str]
    admission: frozenset[str] = frozenset(ADMISSION_RULES)
    learned: tuple[LearnedComponent, ...] = ()
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
    learned = _learned(data.get("learned", []))
    # Only when given: a spec without reward models keeps the version it always had.
    merged.pop("learned", None)
    if learned:
        merged["learned"] = [{"checkpoint": c.checkpoint, "weight": c.weight} for c in learned]
    return RewardSpec(
        name=name,
        outcome=outcome,
        process=process,
        negative_value=_number(merged["anticheat"], "negative_value", "anticheat"),
        policies=dict(policies),
        admission=frozenset(refuse),
        learned=learned,
        raw=merged,
    )


def _learned(given: Any) -> tuple[LearnedComponent, ...]:
    """`learned: [{checkpoint: ID or NAME, weight: W}]`, never alone and never dominant."""
    if not isinstance(given, list):
        raise SpecError("learned must be a list of {checkpoint, weight}")
    components = []
    for index, item in enumerate(given):
        where = f"learned[{index}]"
        if not isinstance(item, dict) or set(item) - {"checkpoint", "weight"}:
            raise SpecError(f"{where} must be a mapping with checkpoint and weight only")
        checkpoint = item.get("checkpoint")
        if isinstance(checkpoint, bool) or not isinstance(checkpoint, int | str) or not str(checkpoint).strip():
            raise SpecError(f"{where}.checkpoint must be a reward-model checkpoint's id or name")
        weight = _number(item, "weight", where)
        if not 0 < weight <= MAX_LEARNED_WEIGHT:
            raise SpecError(f"{where}.weight must be in (0, {MAX_LEARNED_WEIGHT}]")
        components.append(LearnedComponent(str(checkpoint).strip(), weight))
    total = sum(c.weight for c in components)
    if total > MAX_LEARNED_WEIGHT:
        raise SpecError(
            f"learned weights add up to {total:g}; at most {MAX_LEARNED_WEIGHT} "
            "(a reward model never outweighs the verified outcome)"
        )
    return tuple(components)


def load_spec(path: Path | None = None) -> RewardSpec:
    source = path or DEFAULT_SPEC_PATH
    try:
        data = yaml.safe_load(source.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SpecError(f"{source}: {exc}") from None
    return parse_spec(data)
