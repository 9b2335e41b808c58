"""Error answers for HTML pages: the site's layout with one message, never a bare text body."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def error_page(request: HttpRequest, message: str, *, status: int, title: str = "Cannot do that") -> HttpResponse:
    """The layout with `title` and `message` (escaped: it may quote what a user typed)."""
    return render(request, "error.html", {"title": title, "message": message}, status=status)
