"""What HTML pages share: error answers in the site's layout (never a bare text body), forms filled from a link."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def error_page(request: HttpRequest, message: str, *, status: int, title: str = "Cannot do that") -> HttpResponse:
    """The layout with `title` and `message` (escaped: it may quote what a user typed)."""
    return render(request, "error.html", {"title": title, "message": message}, status=status)


def initial_from_query(request: HttpRequest, keys: tuple[str, ...], limit: int) -> dict[str, str]:
    """A form's initial values from the query of a link to it (each bounded; the form checks them)."""
    return {k: request.GET[k][:limit] for k in keys if request.GET.get(k)}
