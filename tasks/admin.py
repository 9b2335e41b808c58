from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest

from tasks.changes import ChangeError, change_split, change_test_command
from tasks.models import Task, TaskSuite


@admin.register(TaskSuite)
class TaskSuiteAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    # Suites come from imports and builders; what an admin changes here is the split (audited, re-validated).
    list_display = ("name", "split", "created_at")
    list_filter = ("split",)
    search_fields = ("name",)
    fields = ("name", "split", "description", "created_at")
    readonly_fields = ("name", "description", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: TaskSuite, form: Any, change: bool) -> None:
        if "split" in form.changed_data:
            try:
                run = change_split(obj, obj.split, request.user)
            except ChangeError as exc:
                messages.error(request, str(exc))
                return
            if run is not None:
                messages.info(request, f"validation run #{run.pk} started for {obj.name}")


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    # Only the test command is editable: the rest is the task's content, changed by importing it again.
    list_display = ("task_id", "suite", "source", "validation_status", "test_command")
    list_filter = ("source", "validation_status", "suite")
    search_fields = ("task_id", "repo")
    fields = ("task_id", "suite", "repo", "test_command", "version", "validation_status")
    readonly_fields = ("task_id", "suite", "repo", "version", "validation_status")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Task, form: Any, change: bool) -> None:
        if "test_command" in form.changed_data:
            try:
                runs = change_test_command([obj], obj.test_command, request.user)
            except ChangeError as exc:
                messages.error(request, str(exc))
                return
            for run in runs:
                messages.info(request, f"validation run #{run.pk} started for {obj.suite.name}")
