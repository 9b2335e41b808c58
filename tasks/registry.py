"""Columns that apps above `tasks` add to the suite page.

`tasks` is below `rewards` and `trajectories`, so its views cannot import them. An app
above registers a `SuiteColumn` in its `AppConfig.ready()` (the reward gap comes from
`rewards`); the suite page renders whatever is registered, in registration order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tasks.models import Task


@dataclass(frozen=True, kw_only=True)
class SuiteColumn:
    key: str
    heading: str
    # One value per task primary key; tasks without a value show a dash.
    load: Callable[[list[Task]], dict[int, Any]]
    # Rendered in the column's cell with `value` (never None) and `task` in the context.
    cell_template: str
    # Rendered above the table with `summary` (what `summarise` made of the values) and `suite`.
    summary_template: str = ""
    summarise: Callable[[list[Task], dict[int, Any]], dict[str, Any]] | None = None
    # Rendered beside "Validate this suite" with `summary` and `suite`: the column's own action.
    action_template: str = ""
    title: str = ""


_columns: dict[str, SuiteColumn] = {}


def register_suite_column(column: SuiteColumn) -> None:
    if column.key in _columns:
        raise ValueError(f"suite column {column.key!r} is registered twice")
    _columns[column.key] = column


def suite_columns() -> list[SuiteColumn]:
    return list(_columns.values())


@dataclass(frozen=True)
class LoadedColumn:
    column: SuiteColumn
    values: dict[int, Any]
    summary: dict[str, Any]


def load_suite_columns(tasks: list[Task]) -> list[LoadedColumn]:
    loaded = []
    for column in suite_columns():
        values = column.load(tasks)
        summary = column.summarise(tasks, values) if column.summarise else {}
        loaded.append(LoadedColumn(column, values, summary))
    return loaded
