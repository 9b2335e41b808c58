"""What the detectors report: a Flag for the reward, a Finding inside one analysed source."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple


@dataclass(frozen=True)
class Flag:
    detector: str
    evidence: str
    path: str = ""
    line: int | None = None
    step: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}


def listed(items: list[str], most: int, sep: str = "; ") -> str:
    """Evidence that names a few items: the first `most`, then how many more there were."""
    more = f" (+{len(items) - most} more)" if len(items) > most else ""
    return sep.join(items[:most]) + more


@dataclass
class SourceScan:
    flags: list[Flag] = field(default_factory=list)
    # path -> why its syntax tree could not be read; nothing is flagged for such a file
    # (code Python cannot parse does not import either, so the tests fail on their own).
    unparsed: dict[str, str] = field(default_factory=dict)


class Finding(NamedTuple):
    detector: str
    why: str
    line: int
    snippet: str
