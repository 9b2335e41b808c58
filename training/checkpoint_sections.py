"""Sections that apps above `training` add to the checkpoint page.

`training` is below `evaluation`, so its views cannot import it. An app above registers a
`CheckpointSection` in its `AppConfig.ready()` (the evaluations of a checkpoint come from
`evaluation`); the page renders whatever is registered, in registration order.

Each section names partials for the page's slots (see `Slot`); they are rendered with the
page's context (`checkpoint`, `chain`, `can_research`) plus the keys the section's `load`
returned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from training.models import Checkpoint


class Slot(StrEnum):
    LINEAGE = "lineage"  # nodes drawn after the checkpoint itself, at the end of the lineage graph
    BODY = "body"  # cards below the checkpoint's data, code and metrics


@dataclass(frozen=True, kw_only=True)
class CheckpointSection:
    key: str
    templates: dict[Slot, str]
    # Context for the partials, loaded once per page: keep it to a query or two.
    load: Callable[[Checkpoint], dict[str, Any]] | None = None


_sections: dict[str, CheckpointSection] = {}


def register_checkpoint_section(section: CheckpointSection) -> None:
    if section.key in _sections:
        raise ValueError(f"checkpoint section {section.key!r} is registered twice")
    _sections[section.key] = section


def checkpoint_sections() -> list[CheckpointSection]:
    return list(_sections.values())


def page_context(checkpoint: Checkpoint) -> dict[str, Any]:
    """The sections' context for one checkpoint, and `slots`: each slot's partials, in order."""
    context: dict[str, Any] = {}
    partials: dict[str, list[str]] = {slot.value: [] for slot in Slot}
    for section in checkpoint_sections():
        if section.load is not None:
            context.update(section.load(checkpoint))
        for slot, template in section.templates.items():
            partials[slot.value].append(template)
    return {**context, "slots": partials}
