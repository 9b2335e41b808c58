"""Sections that apps above `trajectories` add to the trajectory page.

`trajectories` is below `rewards` and `annotation`, so its views cannot import them. An
app above registers a `TrajectorySection` in its `AppConfig.ready()` (the score comes from
`rewards`, labels and review marks from `annotation`); the page renders whatever is
registered, in registration order.

Each section names partials for the page's slots (see `Slot`); they are rendered with
the page's context (`t` the trajectory, `s` the step inside the step slot, `can_research`)
plus the keys the section's `load` returned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from trajectories.models import Step, Trajectory


class Slot(StrEnum):
    OUTCOME = "outcome"  # rows (<dt>/<dd>) of the Outcome card's list
    SUMMARY = "summary"  # blocks below the Outcome and Provenance cards
    ACTIONS = "actions"  # buttons for researchers, beside "Replay"
    STEP = "step"  # inside each step, between its action and its observation
    AFTER_STEPS = "after_steps"  # blocks after the steps, before the final patch


@dataclass(frozen=True, kw_only=True)
class TrajectorySection:
    key: str
    templates: dict[Slot, str]
    # Context for the partials, loaded once per page: keep it to a query or two, the page
    # has a query budget however many sections there are.
    load: Callable[[Trajectory], dict[str, Any]] | None = None
    # Applied to the query for the page's steps, e.g. to prefetch what the step partial shows.
    steps: Callable[[QuerySet[Step]], QuerySet[Step]] | None = None


_sections: dict[str, TrajectorySection] = {}


def register_trajectory_section(section: TrajectorySection) -> None:
    if section.key in _sections:
        raise ValueError(f"trajectory section {section.key!r} is registered twice")
    _sections[section.key] = section


def trajectory_sections() -> list[TrajectorySection]:
    return list(_sections.values())


def steps_query(steps: QuerySet[Step]) -> QuerySet[Step]:
    for section in trajectory_sections():
        if section.steps is not None:
            steps = section.steps(steps)
    return steps


def page_context(trajectory: Trajectory, slots: Iterable[Slot] = tuple(Slot)) -> dict[str, Any]:
    """The sections' context for one trajectory, and `slots`: each slot's partials, in order.

    Only the sections with a partial in one of `slots` are loaded: a chunk of steps loaded on
    demand renders the step slot alone and need not pay for the outcome's queries.
    """
    wanted = set(slots)
    context: dict[str, Any] = {}
    partials: dict[str, list[str]] = {slot.value: [] for slot in Slot}
    for section in trajectory_sections():
        if wanted.isdisjoint(section.templates):
            continue
        if section.load is not None:
            context.update(section.load(trajectory))
        for slot, template in section.templates.items():
            if slot in wanted:
                partials[slot.value].append(template)
    return {**context, "slots": partials}
