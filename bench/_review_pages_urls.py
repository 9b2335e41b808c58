"""The URLs bench/_review_pages_child.py measures: the site's own, and the floor beside them."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import include, path

from core.permissions import role_required


@role_required()
def floor(request: HttpRequest) -> HttpResponse:
    """What any page costs before its own work: the middleware, the session, the user and the
    role check, with a body of a few bytes. The trajectory page's ratio is taken against it."""
    return HttpResponse(request.user.get_username(), content_type="text/plain")


urlpatterns = [path("bench/floor/", floor), path("", include("webapp.urls"))]
