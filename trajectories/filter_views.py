"""Saved filters: a reviewer's named trajectory-list queries."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.permissions import role_required
from trajectories.models import SavedFilter


@require_POST
@role_required()
def save_filter(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "").strip()[:100]
    query = request.POST.get("query", "")[:2000]
    if not name:
        messages.error(request, "Name the filter to save it.")
    else:
        SavedFilter.objects.update_or_create(owner=request.user, name=name, defaults={"query": query})  # type: ignore[misc]
    return redirect(f"{reverse('trajectories:list')}?{query}")
