from __future__ import annotations

from django.urls import path

from rewards import views

app_name = "rewards"
urlpatterns = [
    path("trajectories/<uuid:trajectory_id>/rescore/", views.rescore, name="rescore"),
    path("batches/<int:batch_id>/score/", views.score_batch, name="score-batch"),
    path("suites/<slug:suite>/check/", views.check_suite, name="check-suite"),
    path("suites/<slug:suite>/check/<int:check_id>/", views.reward_check, name="reward-check"),
    path(
        "trajectories/<uuid:trajectory_id>/rescore/<str:job_id>/",
        views.rescore_status,
        name="rescore-status",
    ),
]
