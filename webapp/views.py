from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from core.permissions import role_required
from webapp.queries import dashboard_counts


@role_required()
def dashboard(request: HttpRequest) -> HttpResponse:
    return render(request, "webapp/dashboard.html", {"counts": dashboard_counts()})
