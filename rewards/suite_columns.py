"""The suite page's reward-gap column: can the reward tell the expected patch from empty and stubs?"""

from __future__ import annotations

from typing import Any

from rewards.models import RewardSanity
from rewards.reward_checks import latest_reward_check
from rewards.services import active_spec
from tasks.models import Task
from tasks.registry import SuiteColumn, register_suite_column


def reward_sanity_by_task(tasks: list[Task]) -> dict[int, RewardSanity]:
    """The reward sanity check of each task under the current reward spec, if run."""
    version = active_spec().version
    return {row.task_id: row for row in RewardSanity.objects.filter(task__in=tasks, spec_version=version)}


def _summarise(tasks: list[Task], checks: dict[int, Any]) -> dict[str, Any]:
    blind = [task for task in tasks if task.pk in checks and not checks[task.pk].separates]
    # The page lists one suite's tasks: the latest check of that suite, if any.
    check = latest_reward_check(tasks[0].suite_id) if tasks else None
    return {"blind": blind, "checked": len(checks), "check": check}


def register() -> None:
    register_suite_column(
        SuiteColumn(
            key="reward_gap",
            heading="Reward gap",
            title="expected patch vs empty and stub patches",
            load=reward_sanity_by_task,
            cell_template="rewards/_suite_gap_cell.html",
            summary_template="rewards/_suite_gap_summary.html",
            summarise=_summarise,
            action_template="rewards/_suite_gap_action.html",
        )
    )
