from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from annotation.api import ComparisonViewSet
from annotation.api_sets import ComparisonSetViewSet, JudgementViewSet, PreferenceSetViewSet
from core import api_errors
from evaluation.api import EvalRunViewSet
from evaluation.views import health
from rewards.api import RewardViewSet, ScoringRunViewSet
from tasks.api import SuiteViewSet, TaskViewSet
from training.api import CheckpointViewSet, TrainingRunViewSet
from training.api_sets import TrainingSetViewSet
from trajectories.api import TrajectoryViewSet
from trajectories.api_batches import BatchViewSet
from webapp import error_views, profile_views, views

# Path converters, not regexes: ids are typed (integer, uuid, slug) in the schema and its clients.
router = DefaultRouter(use_regex_path=False)
router.include_format_suffixes = False  # `?format=json` is the one way; no `.json` twin of each path
router.register("suites", SuiteViewSet, basename="suite")
router.register("tasks", TaskViewSet, basename="task")
router.register("trajectories", TrajectoryViewSet, basename="trajectory")
# Before "rewards": its detail route would read "score" as a reward id.
router.register("rewards/score", ScoringRunViewSet, basename="scoring-run")
router.register("rewards", RewardViewSet, basename="reward")
router.register("batches", BatchViewSet, basename="batch")
router.register("comparison-sets", ComparisonSetViewSet, basename="comparison-set")
router.register("comparisons", ComparisonViewSet, basename="comparison")
router.register("judgements", JudgementViewSet, basename="judgement")
router.register("preference-sets", PreferenceSetViewSet, basename="preference-set")
router.register("training-sets", TrainingSetViewSet, basename="training-set")
router.register("training-runs", TrainingRunViewSet, basename="training-run")
router.register("checkpoints", CheckpointViewSet, basename="checkpoint")
router.register("eval-runs", EvalRunViewSet, basename="eval-run")

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("profile/", profile_views.profile, name="profile"),
    path("profile/tokens/<int:token_id>/revoke/", profile_views.revoke, name="profile-token-revoke"),
    path("favicon.ico", error_views.favicon, name="favicon"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("tasks/", include("tasks.urls")),
    path("trajectories/", include("trajectories.urls")),
    path("batches/", include("trajectories.batch_urls")),
    path("rewards/", include("rewards.urls")),
    path("annotation/", include("annotation.urls")),
    path("training/", include("training.urls")),
    path("evaluation/", include("evaluation.urls")),
    path("health/", health, name="health"),
    path("audit/", include("core.urls")),
    path("api/v1/exports/", include("webapp.export_urls")),
    path("api/v1/", include(router.urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its start-up script as a file: the CSP runs no inline script.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("admin/", admin.site.urls),
]

# Under /api/ both answer in problem-details JSON (core.api_errors); pages elsewhere.
handler404 = api_errors.handler404
handler500 = api_errors.problem_or_page(error_views.handler500)
