"""REST for task suites and tasks. Tasks come in by import and builders; what the API changes is how
they are used: a suite's split and a task's test command (tasks.changes), each followed by a validation run."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import Count, QuerySet
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_serializer
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_filters import CreatedRangeFilterSet
from core.vocabulary import Split, choices
from tasks.changes import ChangeError, change_split, change_test_command
from tasks.models import Task, TaskSuite, ValidationRun


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "suite",
            value={
                "name": "demo",
                "split": "train",
                "description": "Twelve small Python bugs",
                "task_count": 12,
                "created_at": "2026-11-02T09:00:00Z",
            },
            response_only=True,
        )
    ]
)
class SuiteSerializer(serializers.ModelSerializer[TaskSuite]):
    task_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = TaskSuite
        fields = ["name", "split", "description", "task_count", "created_at"]


TASK_EXAMPLE = {
    "task_id": "task_0001",
    "suite": "demo",
    "statement": "parse_config drops the last line when the file has no trailing newline.",
    "source": "manual",
    "repo": "demo/configlib",
    "base_commit": "3f2c1e0",
    "license": "MIT",
    "test_command": "python -m pytest -q tests",
    "tests_dest": "tests",
    "fail_to_pass": ["tests/test_config.py::test_last_line"],
    "pass_to_pass": ["tests/test_config.py::test_empty"],
    "visible_tests": [],
    "timeout_seconds": 120,
    "max_steps": 30,
    "difficulty": "easy",
    "tags": ["parsing"],
    "metadata": {},
    "expected_patch": "--- a/configlib.py\n+++ b/configlib.py\n...",
    "snapshot_hash": "9b1d...",
    "tests_hash": "c04e...",
    "snapshot_files": [["configlib.py", 812]],
    "version": "9b1d0c2a",
    "validation_status": "valid",
    "validation_report": {"fail_to_pass": {"before": "failed", "after": "passed"}, "runs": 3},
    "created_at": "2026-11-02T09:00:00Z",
    "updated_at": "2026-11-02T09:05:00Z",
}


@extend_schema_serializer(examples=[OpenApiExample("task", value=TASK_EXAMPLE, response_only=True)])
class TaskSerializer(serializers.ModelSerializer[Task]):
    suite: serializers.SlugRelatedField[TaskSuite] = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Task
        fields = list(TASK_EXAMPLE)


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "validation report",
            value={
                "task_id": "task_0001",
                "version": "9b1d0c2a",
                "validation_status": "valid",
                "validation_report": TASK_EXAMPLE["validation_report"],
            },
            response_only=True,
        )
    ]
)
class ValidationSerializer(serializers.ModelSerializer[Task]):
    """A task's last validation: do the fail-to-pass tests fail before and pass after the reference patch."""

    class Meta:
        model = Task
        fields = ["task_id", "version", "validation_status", "validation_report"]


@extend_schema_serializer(
    examples=[OpenApiExample("move to eval", value={"split": "eval", "runs": 3}, request_only=True)]
)
class SplitChangeSerializer(serializers.Serializer[None]):
    split = serializers.ChoiceField(choices=choices(Split))
    runs = serializers.IntegerField(min_value=1, max_value=20, default=3, help_text="validation runs per task")


@extend_schema_serializer(
    examples=[
        OpenApiExample("new command", value={"test_command": "python -m pytest -q tests", "runs": 3}, request_only=True)
    ]
)
class CommandChangeSerializer(serializers.Serializer[None]):
    test_command = serializers.CharField(max_length=1000, help_text="`pytest ...` or `python -m pytest ...`")
    runs = serializers.IntegerField(min_value=1, max_value=20, default=3, help_text="validation runs per task")


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "changed", value={"changed": "suite demo: split eval", "validation_runs": [12]}, response_only=True
        )
    ]
)
class ChangeResultSerializer(serializers.Serializer[None]):
    changed = serializers.CharField()
    validation_runs = serializers.ListField(child=serializers.IntegerField(), help_text="ValidationRun ids started")


def _change_response(changed: str, runs: list[ValidationRun]) -> Response:
    return Response({"changed": changed, "validation_runs": [run.pk for run in runs]}, status=202)


class SuiteFilter(CreatedRangeFilterSet):
    class Meta:
        model = TaskSuite
        fields = ["split"]


class TaskFilter(CreatedRangeFilterSet):
    suite = django_filters.CharFilter(field_name="suite__name")
    tag = django_filters.CharFilter(method="filter_tag")

    class Meta:
        model = Task
        fields = ["suite", "source", "repo", "difficulty", "validation_status"]

    def filter_tag(self, queryset: QuerySet[Task], name: str, value: str) -> QuerySet[Task]:
        # Matching the quoted JSON string works on SQLite and PostgreSQL alike.
        return queryset.filter(tags__icontains=f'"{value}"')


class SuiteViewSet(viewsets.ReadOnlyModelViewSet[TaskSuite]):
    """Task suites with their task counts."""

    serializer_class = SuiteSerializer
    lookup_field = "name"
    lookup_value_converter = "slug"
    filterset_class = SuiteFilter

    def get_queryset(self) -> QuerySet[TaskSuite]:
        return TaskSuite.objects.annotate(task_count=Count("tasks"))

    @extend_schema(request=SplitChangeSerializer, responses={202: ChangeResultSerializer}, filters=False)
    @action(detail=True, methods=["post"], url_path="split", pagination_class=None, filterset_class=None)
    def split(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Move the suite to another split and validate its tasks again (a validation run, in the background)."""
        body = SplitChangeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        suite = self.get_object()
        try:
            run = change_split(suite, body.validated_data["split"], request.user, body.validated_data["runs"])
        except ChangeError as exc:
            raise serializers.ValidationError({"split": str(exc)}) from None
        return _change_response(f"suite {suite.name}: split {suite.split}", [run] if run else [])


class TaskViewSet(viewsets.ReadOnlyModelViewSet[Task]):
    """Tasks, their frozen snapshot's hashes and their validation reports."""

    serializer_class = TaskSerializer
    lookup_field = "task_id"
    lookup_value_converter = "str"  # task ids may hold dots
    filterset_class = TaskFilter

    def get_queryset(self) -> QuerySet[Task]:
        return Task.objects.select_related("suite")

    @extend_schema(responses={200: ValidationSerializer}, filters=False)
    @action(detail=True, methods=["get"], pagination_class=None, filterset_class=None)
    def validation(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The task's validation status and the report of its last validation run."""
        return Response(ValidationSerializer(self.get_object()).data)

    @extend_schema(request=CommandChangeSerializer, responses={202: ChangeResultSerializer}, filters=False)
    @action(detail=True, methods=["post"], url_path="test-command", pagination_class=None, filterset_class=None)
    def test_command(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Give the task a new test command (a new version) and validate its suite again."""
        body = CommandChangeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        task = self.get_object()
        command = body.validated_data["test_command"]
        try:
            runs = change_test_command([task], command, request.user, body.validated_data["runs"])
        except ChangeError as exc:
            raise serializers.ValidationError({"test_command": str(exc)}) from None
        return _change_response(f"task {task.task_id}: test command {command!r}", runs)
