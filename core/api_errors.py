"""Every API error in one shape: RFC 9457 problem details (`application/problem+json`).

    {"type": "urn:crucible:problem:validation", "title": "Bad Request", "status": 400,
     "detail": "2 fields are not valid: config, name", "instance": "/api/v1/training-runs/",
     "errors": {"config": ["This field is required."], "name": ["..."]}}

`type` is a URN naming the kind of problem (stable, documented in docs/api.md, never
dereferenced); `title` is the HTTP reason phrase; `errors` (validation only) maps each field,
nested fields joined with dots, to its messages. DRF's exceptions come through
`exception_handler` (settings: REST_FRAMEWORK["EXCEPTION_HANDLER"]); Django's own 404 and 500
under /api/ come through `handler404` and `problem_or_page`, wired in webapp/urls.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import wraps
from http import HTTPStatus
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

logger = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
API_PREFIX = "/api/"
TYPE_PREFIX = "urn:crucible:problem:"
NON_FIELD = "non_field_errors"
# Field names in `detail`: the full list is in `errors`.
DETAIL_FIELDS = 5


def problem_type(code: str) -> str:
    return TYPE_PREFIX + code.replace("_", "-")


def problem(
    status: int, detail: str, *, code: str, instance: str, errors: dict[str, list[str]] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": problem_type(code),
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "instance": instance,
    }
    if errors is not None:
        body["errors"] = errors
    return body


def field_errors(data: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error lists and dicts as one flat {"a.b.0": [messages]} map."""
    out: dict[str, list[str]] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            for field, messages in field_errors(value, f"{prefix}.{key}" if prefix else str(key)).items():
                out.setdefault(field, []).extend(messages)
    elif isinstance(data, list) and any(isinstance(item, dict | list) for item in data):
        for index, item in enumerate(data):
            for field, messages in field_errors(item, f"{prefix}.{index}" if prefix else str(index)).items():
                out.setdefault(field, []).extend(messages)
    elif isinstance(data, list):
        out[prefix or NON_FIELD] = [str(item) for item in data]
    else:
        out[prefix or NON_FIELD] = [str(data)]
    return out


def _validation_detail(errors: dict[str, list[str]]) -> str:
    if list(errors) == [NON_FIELD]:
        return "; ".join(errors[NON_FIELD])
    names = [name for name in errors if name != NON_FIELD]
    shown = ", ".join(names[:DETAIL_FIELDS]) + (", ..." if len(names) > DETAIL_FIELDS else "")
    if len(names) == 1:
        return f"{names[0]}: {'; '.join(errors[names[0]])}"
    return f"{len(names)} fields are not valid: {shown}"


def _code(exc: Exception) -> str:
    # Django's own exceptions, as DRF's handler answers them.
    if isinstance(exc, Http404):
        return "not_found"
    if isinstance(exc, PermissionDenied):
        return "permission_denied"
    if isinstance(exc, exceptions.ValidationError):
        return "validation"
    if isinstance(exc, exceptions.APIException):
        return str(exc.default_code)
    return "error"


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler (status, WWW-Authenticate, Retry-After), then the body in problem shape."""
    response = drf_exception_handler(exc, context)
    if response is None:
        # Not an API error: Django's handler500 answers, in problem shape under /api/.
        return None
    request = context.get("request")
    instance = request.path if request is not None else ""
    if isinstance(exc, exceptions.ValidationError):
        errors = field_errors(response.data)
        body = problem(
            response.status_code, _validation_detail(errors), code="validation", instance=instance, errors=errors
        )
    else:
        data = response.data
        detail = data.get("detail", "") if isinstance(data, dict) else data
        body = problem(response.status_code, str(detail), code=_code(exc), instance=instance)
    response.data = body
    # The browsable API's HTML page keeps its own type; every JSON answer says what it is.
    renderer = getattr(request, "accepted_renderer", None)
    if renderer is None or getattr(renderer, "format", "json") == "json":
        response.content_type = PROBLEM_JSON
    return response


def problem_response(status: int, detail: str, *, code: str, instance: str) -> JsonResponse:
    return JsonResponse(problem(status, detail, code=code, instance=instance), status=status, content_type=PROBLEM_JSON)


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's 404 (no URL matched, or Http404 outside DRF): a problem under /api/, a page elsewhere."""
    if request.path.startswith(API_PREFIX):
        return problem_response(
            404, "Nothing here: see /api/docs/ for the endpoints.", code="not_found", instance=request.path
        )
    return defaults.page_not_found(request, exception or Exception())


def problem_or_page(page: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """A handler500 that answers /api/ clients with a problem and everyone else with `page`."""

    @wraps(page)
    def handler500(request: HttpRequest) -> HttpResponse:
        if request.path.startswith(API_PREFIX):
            # The traceback is already logged by Django; the client gets no internals.
            return problem_response(
                500, "The server failed on this request; it was logged.", code="server_error", instance=request.path
            )
        return page(request)

    return handler500
