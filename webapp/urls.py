from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from tasks.api import SuiteViewSet, TaskViewSet
from trajectories.api import TrajectoryViewSet
from webapp import views

router = DefaultRouter()
router.register("suites", SuiteViewSet, basename="suite")
router.register("tasks", TaskViewSet, basename="task")
router.register("trajectories", TrajectoryViewSet, basename="trajectory")

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("tasks/", include("tasks.urls")),
    path("trajectories/", include("trajectories.urls")),
    path("batches/", include("trajectories.batch_urls")),
    path("rewards/", include("rewards.urls")),
    path("annotation/", include("annotation.urls")),
    path("training/", include("training.urls")),
    path("api/v1/", include(router.urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("admin/", admin.site.urls),
]
