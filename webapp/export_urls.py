"""Streaming exports over the API: `/api/v1/exports/<kind>/?format=...`."""

from __future__ import annotations

from django.urls import URLPattern, path

from webapp.export_views import ExportView, StoredExportView

urlpatterns: list[URLPattern] = [
    path("stored/<str:kind>/<str:name>/", StoredExportView.as_view(), name="stored-export"),
    path("<str:kind>/", ExportView.as_view(), name="export"),
]
