from __future__ import annotations

from django.urls import path

from core import views

app_name = "audit"

urlpatterns = [
    path("", views.audit_list, name="list"),
]
