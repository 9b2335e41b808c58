from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from annotation.api import ComparisonViewSet
from evaluation.api import EvalRunViewSet
from evaluation.views import health
from tasks.api import SuiteViewSet, TaskViewSet
from training.api import CheckpointViewSet, TrainingRunViewSet
from trajectories.api import TrajectoryViewSet
from webapp import error_views, profile_views, views

router = DefaultRouter()
router.register("suites", SuiteViewSet, basename="suite")
router.register("tasks", TaskViewSet, basename="task")
router.register("trajectories", TrajectoryViewSet, basename="trajectory")
router.register("training-runs", TrainingRunViewSet, basename="training-run")
router.register("checkpoints", CheckpointViewSet, basename="checkpoint")
router.register("comparisons", ComparisonViewSet, basename="comparison")
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
    path("api/v1/exports/", include("webapp.export_urls")),
    path("api/v1/", include(router.urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("admin/", admin.site.urls),
]

handler500 = error_views.handler500
