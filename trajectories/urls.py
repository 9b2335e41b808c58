from django.urls import path

from trajectories import filter_views, transcript_views, views

app_name = "trajectories"
urlpatterns = [
    path("", views.trajectory_list, name="list"),
    path("compare/", transcript_views.compare, name="compare"),
    path("<uuid:trajectory_id>/", views.trajectory_detail, name="detail"),
    path("<uuid:trajectory_id>/steps/", views.trajectory_steps, name="steps"),
    path("<uuid:trajectory_id>/transcript/", transcript_views.transcript, name="transcript"),
    path("<uuid:trajectory_id>/transcript/<int:number>.json", transcript_views.step_request, name="step-request"),
    path("<uuid:trajectory_id>/replay/", views.replay, name="replay"),
    path("filters/", filter_views.save_filter, name="save-filter"),
]
