"""A build report: candidates -> built -> valid, and why every other candidate is not a task.

Plain Python; a builder fills one in as it goes and the command stores its JSON on the suite
(`TaskSuite.build_report`), so a bad candidate is a line in the report, never an aborted build.

A build run again after an interruption resumes: a candidate whose task the suite already holds
is `already_built` (counted as built, not rebuilt) and a task already validated keeps its result
(`already_validated`), so the totals are those of the whole build, not of the last run's part.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TypedDict

# Skipped candidates and validation reasons shown in full; the counts always cover all of them.
MAX_LISTED = 500
MAX_DETAIL = 300


class SkippedCandidate(TypedDict):
    candidate: str  # a commit, or a mutant's description
    subject: str
    reason: str
    detail: str


class BuildReportJSON(TypedDict):
    builder: str
    repo: str
    options: dict[str, Any]
    candidates: int
    built: int  # already_built included
    already_built: int
    validated: int  # already_validated included
    already_validated: int
    valid: int
    skipped_by_reason: dict[str, int]
    skipped: list[SkippedCandidate]
    validation: dict[str, str]  # task id -> status
    invalid_by_reason: dict[str, int]
    environments: list[str]  # one line per environment the built tasks use: built, reused, or why not
    gate: dict[str, Any]  # the repository gate's report (tasks.gate), {} when none ran


@dataclass
class BuildReport:
    builder: str
    repo: str
    options: dict[str, Any] = field(default_factory=dict)
    candidates: int = 0
    built: list[str] = field(default_factory=list)
    already_built: list[str] = field(default_factory=list)  # a subset of `built`
    already_validated: set[str] = field(default_factory=set)  # a subset of `validation`'s keys
    skipped: list[SkippedCandidate] = field(default_factory=list)
    validation: dict[str, str] = field(default_factory=dict)
    invalid_reasons: Counter[str] = field(default_factory=Counter)
    environments: list[str] = field(default_factory=list)
    gate: dict[str, Any] = field(default_factory=dict)

    def skip(self, candidate: str, subject: str, reason: str, detail: str = "") -> None:
        self.skipped.append(
            SkippedCandidate(candidate=candidate, subject=subject[:200], reason=str(reason), detail=detail[:MAX_DETAIL])
        )

    def resumed(self, task_id: str) -> None:
        """The suite holds this candidate's task from an earlier run of the same build."""
        self.built.append(task_id)
        self.already_built.append(task_id)

    def validated(self, task_id: str, status: str, reasons: list[str], earlier: bool = False) -> None:
        """`earlier`: the result of a validation an earlier run of the build stored."""
        if earlier:
            self.already_validated.add(task_id)
        self.validation[task_id] = status
        # Counted by the reason's head, so "tests cannot be collected ..." groups across files.
        self.invalid_reasons.update({reason.split(":")[0][:120] for reason in reasons if reason})

    def to_json(self) -> BuildReportJSON:
        statuses = Counter(self.validation.values())
        return BuildReportJSON(
            builder=self.builder,
            repo=self.repo,
            options=self.options,
            candidates=self.candidates,
            built=len(self.built),
            already_built=len(self.already_built),
            validated=len(self.validation),
            already_validated=len(self.already_validated),
            valid=statuses.get("valid", 0),
            skipped_by_reason=dict(Counter(s["reason"] for s in self.skipped).most_common()),
            skipped=self.skipped[:MAX_LISTED],
            validation=self.validation,
            invalid_by_reason=dict(self.invalid_reasons.most_common()),
            environments=self.environments,
            gate=self.gate,
        )
