from __future__ import annotations

from django.urls import URLPattern, path

from training import views

app_name = "training"
urlpatterns: list[URLPattern] = [
    path("sets/", views.training_set_list, name="sets"),
    path("sets/new/", views.create_training_set, name="set-new"),
    path("sets/<slug:name>/<int:version>/", views.training_set_detail, name="set"),
    path("sets/<slug:name>/<int:version>/export/", views.training_set_export, name="set-export"),
]
