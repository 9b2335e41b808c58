from __future__ import annotations

from django.urls import URLPattern, path

from training import checkpoint_views, run_views, views

app_name = "training"
urlpatterns: list[URLPattern] = [
    path("", run_views.run_list, name="runs"),
    path("compare/", run_views.run_compare, name="compare"),
    path("<int:run_id>/", run_views.run_detail, name="run"),
    path("<int:run_id>/metrics/", run_views.run_metrics, name="run-metrics"),
    path("<int:run_id>/cancel/", run_views.run_cancel, name="run-cancel"),
    path("<int:run_id>/resume/", run_views.run_resume, name="run-resume"),
    path("checkpoints/<int:checkpoint_id>/", checkpoint_views.checkpoint_detail, name="checkpoint"),
    path("sets/", views.training_set_list, name="sets"),
    path("sets/new/", views.create_training_set, name="set-new"),
    path("sets/<slug:name>/<int:version>/", views.training_set_detail, name="set"),
    path("sets/<slug:name>/<int:version>/export/", views.training_set_export, name="set-export"),
]
