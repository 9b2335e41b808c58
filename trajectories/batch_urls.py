from django.urls import path

from trajectories import batch_views

app_name = "batches"
urlpatterns = [
    path("", batch_views.batch_list, name="list"),
    path("<int:batch_id>/", batch_views.batch_detail, name="detail"),
    path("<int:batch_id>/state/", batch_views.batch_state, name="state"),
    path("<int:batch_id>/cancel/", batch_views.batch_cancel, name="cancel"),
    path("<int:batch_id>/resume/", batch_views.batch_resume, name="resume"),
    path("<int:batch_id>/tasks/<str:task_id>/", batch_views.batch_group, name="group"),
]
