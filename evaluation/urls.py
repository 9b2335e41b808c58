from __future__ import annotations

from django.urls import URLPattern, path

from evaluation import views

app_name = "evaluation"

urlpatterns: list[URLPattern] = [
    path("", views.eval_list, name="list"),
    path("compare/", views.compare, name="compare"),
    path("training-runs/<int:run_id>/", views.reward_vs_pass, name="reward-vs-pass"),
    path("<int:run_id>/", views.eval_detail, name="detail"),
]
