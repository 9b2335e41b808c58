from __future__ import annotations

import django_filters
from django.db.models import Count, QuerySet
from rest_framework import serializers, viewsets

from tasks.models import Task, TaskSuite


class SuiteSerializer(serializers.ModelSerializer[TaskSuite]):
    task_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = TaskSuite
        fields = ["name", "split", "description", "task_count", "created_at"]


class TaskSerializer(serializers.ModelSerializer[Task]):
    suite: serializers.SlugRelatedField[TaskSuite] = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Task
        fields = [
            "task_id",
            "suite",
            "statement",
            "source",
            "repo",
            "base_commit",
            "license",
            "test_command",
            "tests_dest",
            "fail_to_pass",
            "pass_to_pass",
            "visible_tests",
            "timeout_seconds",
            "max_steps",
            "difficulty",
            "tags",
            "metadata",
            "expected_patch",
            "snapshot_hash",
            "tests_hash",
            "snapshot_files",
            "version",
            "validation_status",
            "validation_report",
            "created_at",
            "updated_at",
        ]


class TaskFilter(django_filters.FilterSet):
    suite = django_filters.CharFilter(field_name="suite__name")
    tag = django_filters.CharFilter(method="filter_tag")

    class Meta:
        model = Task
        fields = ["suite", "source", "repo", "difficulty", "validation_status"]

    def filter_tag(self, queryset: QuerySet[Task], name: str, value: str) -> QuerySet[Task]:
        # Matching the quoted JSON string works on SQLite and PostgreSQL alike.
        return queryset.filter(tags__icontains=f'"{value}"')


class SuiteViewSet(viewsets.ReadOnlyModelViewSet[TaskSuite]):
    serializer_class = SuiteSerializer
    lookup_field = "name"
    filterset_fields = ["split"]

    def get_queryset(self) -> QuerySet[TaskSuite]:
        return TaskSuite.objects.annotate(task_count=Count("tasks"))


class TaskViewSet(viewsets.ReadOnlyModelViewSet[Task]):
    serializer_class = TaskSerializer
    lookup_field = "task_id"
    lookup_value_regex = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
    filterset_class = TaskFilter

    def get_queryset(self) -> QuerySet[Task]:
        return Task.objects.select_related("suite")
