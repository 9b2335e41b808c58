"""Reviewers' pages: everyone's work at a glance (researchers), and one reviewer's judgements."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from annotation.reviewer_stats import JudgementRow, judgement_rows, reviewer_rows
from core.permissions import role_required
from core.roles import RESEARCHER, has_role

SHOWN = 100


@role_required(RESEARCHER)
def reviewer_list(request: HttpRequest) -> HttpResponse:
    return render(request, "annotation/reviewers.html", {"rows": reviewer_rows()})


@role_required()
def reviewer_detail(request: HttpRequest, username: str) -> HttpResponse:
    """A reviewer sees their own page; researchers see anyone's."""
    user = get_object_or_404(User, username=username)
    if user != request.user and not has_role(request.user, RESEARCHER):
        raise PermissionDenied("Only researchers see other reviewers' judgements.")
    rows: list[JudgementRow] = judgement_rows(user, SHOWN)
    return render(request, "annotation/reviewer.html", {"reviewer": user, "rows": rows, "shown": SHOWN})
