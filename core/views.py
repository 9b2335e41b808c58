"""The audit log page: admins only (who did what is itself sensitive: names, exports, roles)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from core.audit import AuditAction
from core.models import AuditEvent
from core.permissions import role_required
from core.roles import ADMIN

AUDIT_PAGE = 50
FILTER_MAX = 150  # a filter longer than any actor name or target label matches nothing anyway


def audit_events(action: str = "", actor: str = "", target: str = "") -> QuerySet[AuditEvent]:
    """Events, newest first, narrowed by action (exact), actor name and target (contains)."""
    events = AuditEvent.objects.all()
    if action:
        events = events.filter(action=action)
    if actor:
        events = events.filter(actor_name__icontains=actor)
    if target:
        # "batch 12" reads as a label, "trajectories.rolloutbatch" as a type, "12" as an id.
        events = events.filter(Q(target_label__icontains=target) | Q(target_type__iexact=target) | Q(target_id=target))
    return events.order_by("-created_at", "-id")


@require_GET
@role_required(ADMIN)
def audit_list(request: HttpRequest) -> HttpResponse:
    action = request.GET.get("action", "")
    action = action if action in set(AuditAction) else ""
    actor = request.GET.get("actor", "").strip()[:FILTER_MAX]
    target = request.GET.get("target", "").strip()[:FILTER_MAX]
    page = Paginator(audit_events(action, actor, target), AUDIT_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "actions": list(AuditAction),
        "action": action,
        "actor": actor,
        "target": target,
    }
    return render(request, "core/audit_list.html", context)
