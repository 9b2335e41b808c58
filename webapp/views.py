from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from core.permissions import role_required
from webapp.demo_checks import demo_check_rows
from webapp.queries import dashboard_counts


@role_required()
def dashboard(request: HttpRequest) -> HttpResponse:
    demo_checks = demo_check_rows()
    if request.headers.get("HX-Target") == "demo-checks":  # the section polling itself: only its rows
        return render(request, "webapp/_demo_checks.html", {"demo_checks": demo_checks})
    return render(request, "webapp/dashboard.html", {"counts": dashboard_counts(), "demo_checks": demo_checks})
