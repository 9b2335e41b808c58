"""`GET /api/v1/exports/<kind>/?format=...`: the export command's streams over HTTP.

Researchers and admins may export (reviewers read pages, they do not take data away);
`?unredacted=1` is an admin's alone, and the response says so in `X-Crucible-Redacted` and in
the export itself. The body is streamed as it is produced, so a 200k-step export holds one
chunk in the server's memory; under ASGI the chunks are pulled from the synchronous stream one
at a time (a plain sync iterator would make Django read the whole export into memory first).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ParseError, PermissionDenied
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from core.roles import ADMIN, RESEARCHER, has_role
from webapp.export_formats import coalesce
from webapp.export_kinds import ExportError, ExportOptions, build_export

FLAGS = ("include_unfinished", "keep_ties", "no_margin", "unredacted")
VALUES = ("suite", "batch", "set", "tokenizer", "model_name")
TRUE, FALSE = ("1", "true", "yes"), ("0", "false", "no", "")


class ResearchersExport(BasePermission):
    message = "Exports need the researcher role."

    def has_permission(self, request: Any, view: Any) -> bool:
        return has_role(request.user, RESEARCHER)


class FormatIsTheExportFormat(DefaultContentNegotiation):
    """`?format=` names the export's format here, not one of DRF's renderers."""

    def select_renderer(self, request: Any, renderers: Any, format_suffix: Any = None) -> Any:
        return renderers[0], renderers[0].media_type


def _flag(params: Any, name: str) -> bool:
    value = params.get(name, "").lower()
    if value not in TRUE + FALSE:
        raise ParseError(f"{name} must be 1 or 0, not {value[:20]!r}")
    return value in TRUE


def _tokenizer(name: str | None) -> str | None:
    """Only a model directory the server already has: a client never names a path on the server."""
    if name is None:
        return None
    models = Path(settings.CRUCIBLE_DEFAULT_MODEL).parent.resolve()
    chosen = (models / name).resolve()
    if "/" in name or chosen.parent != models or not chosen.is_dir():
        raise ParseError(f"tokenizer must be the name of a model directory under var/models/, not {name[:80]!r}")
    return str(chosen)


def options_from(params: Any) -> ExportOptions:
    unknown = sorted(set(params) - {"format", *FLAGS, *VALUES})
    if unknown:
        # An ignored filter would be one the client believes was applied.
        raise ParseError(f"unknown parameter {unknown[0][:40]!r}")
    batch = params.get("batch")
    if batch is not None and not batch.isdigit():
        raise ParseError("batch must be a batch id")
    return ExportOptions(
        suite=params.get("suite"),
        batch=int(batch) if batch is not None else None,
        set_name=params.get("set"),
        include_unfinished=_flag(params, "include_unfinished"),
        keep_ties=_flag(params, "keep_ties"),
        no_margin=_flag(params, "no_margin"),
        tokenizer=_tokenizer(params.get("tokenizer")),
        model_name=params.get("model_name"),
        unredacted=_flag(params, "unredacted"),
    )


async def _pulled(pieces: Iterator[bytes]) -> AsyncIterator[bytes]:
    def step() -> bytes | None:
        return next(pieces, None)

    pull = sync_to_async(step, thread_sensitive=True)
    try:
        while (piece := await pull()) is not None:
            yield piece
    finally:
        # A client that hangs up still gets its audit event: closing the stream writes it.
        close = getattr(pieces, "close", None)
        if close is not None:
            await sync_to_async(close, thread_sensitive=True)()


class ExportView(APIView):
    permission_classes = [ResearchersExport]
    content_negotiation_class = FormatIsTheExportFormat

    @extend_schema(
        summary="Stream an export",
        description=(
            "kind: trajectories | tasks | preferences | training-set. format: jsonl, parquet, hf (a tar of a "
            "Hugging Face datasets directory); tasks also swe-bench and taskdir (a tar of task directories); "
            "trajectories also swe-bench-predictions and episodes (needs tokenizer); training-set also sft. "
            "Redacted unless an admin asks for unredacted=1 (header X-Crucible-Redacted)."
        ),
        parameters=[
            OpenApiParameter("format", OpenApiTypes.STR, default="jsonl"),
            *(OpenApiParameter(name, OpenApiTypes.STR, required=False) for name in VALUES),
            *(OpenApiParameter(name, OpenApiTypes.BOOL, required=False) for name in FLAGS),
        ],
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY},
    )
    def get(self, request: Request, kind: str) -> StreamingHttpResponse:
        options = options_from(request.query_params)
        if options.unredacted and not has_role(request.user, ADMIN):
            raise PermissionDenied("An unredacted export needs the admin role.")
        try:
            export = build_export(kind, request.query_params.get("format", "jsonl"), options, request.user)
        except ExportError as exc:
            raise ParseError(str(exc)) from None
        chunks = coalesce(export.stream())
        body: Iterator[bytes] | AsyncIterator[bytes] = (
            _pulled(chunks) if isinstance(request._request, ASGIRequest) else chunks
        )
        response = StreamingHttpResponse(body, content_type=export.content_type)
        response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
        response["X-Crucible-Redacted"] = "true" if export.redacted else "false"
        response["X-Content-Type-Options"] = "nosniff"
        return response
