from __future__ import annotations

from django.urls import path  # noqa: F401  (filled in as views move here)

app_name = "annotation"
urlpatterns: list = []
