from django.urls import path

from trajectories import filter_views, views

app_name = "trajectories"
urlpatterns = [
    path("", views.trajectory_list, name="list"),
    path("<uuid:trajectory_id>/", views.trajectory_detail, name="detail"),
    path("<uuid:trajectory_id>/replay/", views.replay, name="replay"),
    path("filters/", filter_views.save_filter, name="save-filter"),
]
