"""Streaming exports over the API: `/api/v1/exports/<kind>/?format=...`."""

from __future__ import annotations

from django.urls import URLPattern, path

from webapp.export_views import ExportView

urlpatterns: list[URLPattern] = [path("<str:kind>/", ExportView.as_view(), name="export")]
