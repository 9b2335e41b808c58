"""A build report: candidates -> built -> valid, and why every other candidate is not a task.

Plain Python; a builder fills one in as it goes and the command stores its JSON on the suite
(`TaskSuite.build_report`), so a bad candidate is a line in the report, never an aborted build.
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
    built: int
    validated: int
    valid: int
    skipped_by_reason: dict[str, int]
    skipped: list[SkippedCandidate]
    validation: dict[str, str]  # task id -> status
    invalid_by_reason: dict[str, int]


@dataclass
class BuildReport:
    builder: str
    repo: str
    options: dict[str, Any] = field(default_factory=dict)
    candidates: int = 0
    built: list[str] = field(default_factory=list)
    skipped: list[SkippedCandidate] = field(default_factory=list)
    validation: dict[str, str] = field(default_factory=dict)
    invalid_reasons: Counter[str] = field(default_factory=Counter)

    def skip(self, candidate: str, subject: str, reason: str, detail: str = "") -> None:
        self.skipped.append(
            SkippedCandidate(candidate=candidate, subject=subject[:200], reason=str(reason), detail=detail[:MAX_DETAIL])
        )

    def validated(self, task_id: str, status: str, reasons: list[str]) -> None:
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
            validated=len(self.validation),
            valid=statuses.get("valid", 0),
            skipped_by_reason=dict(Counter(s["reason"] for s in self.skipped).most_common()),
            skipped=self.skipped[:MAX_LISTED],
            validation=self.validation,
            invalid_by_reason=dict(self.invalid_reasons.most_common()),
        )
