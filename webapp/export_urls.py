"""Streaming exports over the API: `/api/v1/exports/<kind>/?format=...`."""

from __future__ import annotations

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
