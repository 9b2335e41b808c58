from django.urls import path

from trajectories import views

app_name = "trajectories"
urlpatterns = [
    path("", views.trajectory_list, name="list"),
    path("<uuid:trajectory_id>/", views.trajectory_detail, name="detail"),
]
