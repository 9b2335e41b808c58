"""The OpenAPI schema's shared parts: the problem-details error body on every operation, and
how the per-user API token is sent (drf-spectacular extension for core.auth)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiExample, extend_schema_serializer
from rest_framework import serializers

from core.api_errors import PROBLEM_JSON, problem
from core.vocabulary import (
    ComparisonChoice,
    ComparisonStrategy,
    RunStatus,
    TaskSource,
    TrajectorySource,
    TrajectoryStatus,
    choices,
)


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "validation",
            value=problem(
                400,
                "samples: Ensure this value is less than or equal to 64.",
                code="validation",
                instance="/api/v1/batches/",
                errors={"samples": ["Ensure this value is less than or equal to 64."]},
            ),
            response_only=True,
        ),
        OpenApiExample(
            "throttled",
            value=problem(
                429,
                "Request was throttled. Expected available in 12 seconds.",
                code="throttled",
                instance="/api/v1/tasks/",
            ),
            response_only=True,
        ),
    ]
)
class ProblemSerializer(serializers.Serializer[dict[str, Any]]):
    """RFC 9457 problem details: every error the API returns has this shape."""

    type = serializers.CharField(help_text="urn:crucible:problem:<kind>, e.g. validation, not-found, throttled")
    title = serializers.CharField(help_text="the HTTP reason phrase")
    status = serializers.IntegerField()
    detail = serializers.CharField(help_text="what went wrong, in one line")
    instance = serializers.CharField(help_text="the path that was asked for")  # type: ignore[assignment]
    errors = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="validation only: each field (nested ones joined with dots) and its messages",
    )


# Every operation can answer these; 400 and 404 only where they can happen.
ALWAYS = ("401", "403", "429")


class ProblemAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        codes = list(ALWAYS)
        if self.method != "GET" or self.get_filter_backends() or self._get_paginator():
            codes.append("400")
        if "{" in self.path:
            codes.append("404")
        for code in codes:
            if code not in responses:
                responses[code] = self._get_response_for_code(ProblemSerializer, code, [PROBLEM_JSON], direction)
        return responses


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "core.auth.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A per-user token made on /profile/ (crc_...): `Authorization: Bearer <token>`.",
        }


# Named enums for settings.SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]: the same (value, label)
# pairs the models' and serializers' choices() give, so each vocabulary is one schema enum.
RUN_STATUS = choices(RunStatus)
TRAJECTORY_STATUS = choices(TrajectoryStatus)
TRAJECTORY_SOURCE = choices(TrajectorySource)
TASK_SOURCE = choices(TaskSource)
COMPARISON_CHOICE = choices(ComparisonChoice)
COMPARISON_STRATEGY = choices(ComparisonStrategy)
