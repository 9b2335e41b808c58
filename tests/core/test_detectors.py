"""Detector names are defined once (core.vocabulary.Detector); the scorer, the spec, evaluation's cheat
rate and the health page use that, and each detector is a cheat or not, exactly once."""

from __future__ import annotations

import re
from pathlib import Path

from core.vocabulary import CHEAT_DETECTORS, NON_CHEAT_DETECTORS, Detector
from rewards.spec import DETECTORS, load_spec

ROOT = Path(__file__).resolve().parents[2]
APPS = ("core", "rewards", "sandbox", "tasks", "trajectories", "annotation", "training", "evaluation", "webapp")
# A flag raised with its detector written as text: the name would drift from the vocabulary.
LITERAL_FLAG = re.compile(r"\bFlag\(\s*[\"']")


def test_every_detector_is_a_cheat_or_not_exactly_once() -> None:
    assert CHEAT_DETECTORS.isdisjoint(NON_CHEAT_DETECTORS)
    assert CHEAT_DETECTORS | NON_CHEAT_DETECTORS == set(Detector)


def test_the_spec_knows_every_detector_and_names_no_other() -> None:
    assert set(DETECTORS) == set(Detector)
    assert set(load_spec().policies) <= set(Detector)


def test_no_code_raises_a_flag_with_a_detector_written_as_text() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for app in APPS
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if LITERAL_FLAG.search(line)
    ]
    assert not found, f"use core.vocabulary.Detector: {found}"


def test_a_detector_is_stored_and_compared_as_its_plain_name() -> None:
    import json

    from rewards.anticheat import Flag

    flag = Flag(Detector.ANSWER_ORACLE, "evidence")
    assert json.loads(json.dumps(flag.to_json()))["detector"] == "answer_oracle"
    assert flag.detector == "answer_oracle" and "answer_oracle" in CHEAT_DETECTORS
