from __future__ import annotations

from django.urls import URLPattern, path

from annotation import views

app_name = "annotation"
urlpatterns: list[URLPattern] = [
    path("trajectories/<uuid:trajectory_id>/steps/<int:number>/labels/", views.add_step_label, name="step-label"),
    path("trajectories/<uuid:trajectory_id>/review/", views.add_review_mark, name="review-mark"),
    path("trajectories/<uuid:trajectory_id>/flags/clear/", views.clear_trajectory_flags, name="clear-flags"),
]
