"""`GET /api/v1/exports/<kind>/?format=...`: the export command's streams over HTTP.

Researchers and admins may export (reviewers read pages, they do not take data away);
`?unredacted=1` is an admin's alone, and the response says so in `X-Crucible-Redacted` and in
the export itself. The body is streamed as it is produced, so a 200k-step export holds one
chunk in the server's memory; under ASGI the chunks are pulled from the synchronous stream one
at a time (a plain sync iterator would make Django read the whole export into memory first).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import APIException, NotFound, ParseError, PermissionDenied, ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.audit import AuditAction
from core.audit import record as audit
from core.objectstore import StoreError
from core.roles import ADMIN, RESEARCHER, has_role
from core.storage import object_store
from webapp.export_formats import coalesce
from webapp.export_kinds import Export, ExportError, ExportOptions, build_export
from webapp.export_store import parse_stored, read_chunks, stored_key, write_to_store

logger = logging.getLogger(__name__)

FLAGS = ("include_unfinished", "keep_ties", "no_margin", "unredacted")
VALUES = ("suite", "batch", "set", "tokenizer", "model_name")
TRUE, FALSE = ("1", "true", "yes"), ("0", "false", "no", "")
# The query parameter of each ExportOptions field whose name differs from it.
PARAMETERS = {"set_name": "set"}


class ResearchersExport(BasePermission):
    message = "Exports need the researcher role."

    def has_permission(self, request: Any, view: Any) -> bool:
        return has_role(request.user, RESEARCHER)


class FormatIsTheExportFormat(DefaultContentNegotiation):
    """`?format=` names the export's format here, not one of DRF's renderers."""

    def select_renderer(self, request: Any, renderers: Any, format_suffix: Any = None) -> Any:
        return renderers[0], renderers[0].media_type


def _invalid(parameter: str, message: str) -> ValidationError:
    """A validation problem whose `errors` is keyed by the query parameter at fault (its `detail` starts with it)."""
    return ValidationError({parameter: [message]})


def _flag(params: Any, name: str) -> bool:
    value = params.get(name, "").lower()
    if value not in TRUE + FALSE:
        raise _invalid(name, f"must be 1 or 0, not {value[:20]!r}")
    return value in TRUE


def _tokenizer(name: str | None) -> str | None:
    """Only a model directory the server already has: a client never names a path on the server."""
    if name is None:
        return None
    models = Path(settings.CRUCIBLE_DEFAULT_MODEL).parent.resolve()
    chosen = (models / name).resolve()
    if "/" in name or chosen.parent != models or not chosen.is_dir():
        raise _invalid("tokenizer", f"must be the name of a model directory under var/models/, not {name[:80]!r}")
    return str(chosen)


def options_from(params: Any) -> ExportOptions:
    unknown = sorted(set(params) - {"format", *FLAGS, *VALUES})
    if unknown:
        # An ignored filter would be one the client believes was applied.
        raise _invalid(unknown[0][:40], f"unknown parameter: exports take {', '.join(('format', *VALUES, *FLAGS))}")
    batch = params.get("batch")
    if batch is not None and not batch.isdigit():
        raise _invalid("batch", "must be a batch id")
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
            "Hugging Face datasets directory); tasks also swe-bench, taskdir and harbor (tars of task directories); "
            "trajectories also swe-bench-predictions, episodes (needs tokenizer) and atif (one ATIF document per "
            "line); training-set also sft. "
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
        export = _export(request, kind, request.query_params)
        response = StreamingHttpResponse(_body(request, coalesce(export.stream())), content_type=export.content_type)
        response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
        response["X-Crucible-Redacted"] = "true" if export.redacted else "false"
        response["X-Content-Type-Options"] = "nosniff"
        return response

    @extend_schema(
        summary="Write an export to the object store",
        description=(
            "The same kinds, formats and options as GET, in a JSON body (format is required), written "
            "whole to the deployment's object store as exports/<kind>/<id>-<format>.<ext>; any web host "
            "then serves it from `download`. For exports too long for one request to wait on a client."
        ),
        request={"application/json": {"type": "object", "properties": {"format": {"type": "string"}}}},
        responses={201: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request, kind: str) -> Response:
        given = request.data if isinstance(request.data, dict) else {}
        if not isinstance(given.get("format"), str):
            raise ParseError("format is required (jsonl, parquet, hf, ...)")
        params = {name: _text(value) for name, value in given.items()}
        export = _export(request, kind, params)
        try:
            stored = write_to_store(export.stream(), object_store(), stored_key(export))
        except StoreError as exc:
            logger.error("export %s %s not stored: %s", kind, export.format, exc)
            raise APIException("The object store refused the export; see the server log.") from None
        return Response(
            {
                "key": stored.key,
                "bytes": stored.bytes,
                "sha256": stored.sha256,
                "count": export.tally.count,
                "redacted": export.redacted,
                "download": reverse("stored-export", args=[stored.kind, stored.name]),
            },
            status=201,
        )


def _text(value: Any) -> str:
    """A JSON body's value as the query string would spell it (true -> 1)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if value is None or isinstance(value, dict | list):
        raise ParseError("export options are strings, numbers or booleans")
    return str(value)


def _export(request: Request, kind: str, params: Any) -> Export:
    options = options_from(params)
    if options.unredacted and not has_role(request.user, ADMIN):
        raise PermissionDenied("An unredacted export needs the admin role.")
    try:
        return build_export(kind, params.get("format", "jsonl"), options, request.user)
    except ExportError as exc:
        if exc.option is None:
            raise ParseError(str(exc)) from None
        raise _invalid(PARAMETERS.get(exc.option, exc.option), str(exc)) from None


def _body(request: Request, chunks: Iterator[bytes]) -> Iterator[bytes] | AsyncIterator[bytes]:
    return _pulled(chunks) if isinstance(request._request, ASGIRequest) else chunks


class StoredExportView(APIView):
    permission_classes = [ResearchersExport]

    @extend_schema(
        summary="Download an export from the object store",
        description="Streamed from the store in chunks by whichever web host answers; an unredacted one is an admin's.",
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY},
    )
    def get(self, request: Request, kind: str, name: str) -> StreamingHttpResponse:
        found = parse_stored(kind, name)
        if found is None:
            raise NotFound("No such stored export.")
        if found.unredacted and not has_role(request.user, ADMIN):
            raise PermissionDenied("An unredacted export needs the admin role.")
        try:
            size, chunks = read_chunks(object_store(), found.key)
        except StoreError:
            raise NotFound("No such stored export.") from None
        audit(request.user, AuditAction.EXPORT, kind, stored=found.key, download=True, redacted=not found.unredacted)
        response = StreamingHttpResponse(_body(request, chunks), content_type=found.content_type)
        response["Content-Length"] = str(size)
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        response["X-Crucible-Redacted"] = "false" if found.unredacted else "true"
        response["X-Content-Type-Options"] = "nosniff"
        return response
