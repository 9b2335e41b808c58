"""The favicon and the 500 page: small pages every visitor may hit, signed in or not."""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse, HttpResponseServerError
from django.shortcuts import render
from django.templatetags.static import static
from django.views.decorators.cache import cache_control
from django.views.defaults import server_error
from django.views.generic.base import RedirectView

logger = logging.getLogger(__name__)

favicon = cache_control(max_age=86400)(RedirectView.as_view(url=static("favicon.svg"), permanent=True))


def handler500(request: HttpRequest) -> HttpResponse:
    """The error page with the site's navigation; Django's bare page if even that fails.

    Django's own handler renders 500.html without the request, so base.html could not
    show who is signed in or the menu.
    """
    try:
        return render(request, "500.html", status=500)
    except Exception:
        logger.exception("the 500 page itself failed; falling back to Django's")
        response = server_error(request)
        return response if isinstance(response, HttpResponseServerError) else HttpResponseServerError()
