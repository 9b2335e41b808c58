from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from tasks.models import Task, TaskSuite


def suites_with_counts() -> QuerySet[TaskSuite]:
    return TaskSuite.objects.annotate(
        task_count=Count("tasks", distinct=True),
        valid_count=Count("tasks", filter=Q(tasks__validation_status=Task.Validation.VALID), distinct=True),
    ).order_by("name")


@dataclass(frozen=True)
class TreeRow:
    depth: int
    name: str
    path: str
    is_dir: bool
    size: int


def file_tree(manifest: list[list[object]]) -> list[TreeRow]:
    """Flatten a [path, size] manifest into rows with directories listed once."""
    rows: list[TreeRow] = []
    seen_dirs: set[str] = set()
    for entry in sorted(manifest, key=lambda e: str(e[0]).split("/")):
        path, size = str(entry[0]), int(entry[1])  # type: ignore[call-overload]
        parts = path.split("/")
        for depth in range(len(parts) - 1):
            directory = "/".join(parts[: depth + 1])
            if directory not in seen_dirs:
                seen_dirs.add(directory)
                rows.append(TreeRow(depth, parts[depth], directory, True, 0))
        rows.append(TreeRow(len(parts) - 1, parts[-1], path, False, size))
    return rows
