from django.urls import path

from trajectories import curation_views, views

app_name = "trajectories"
urlpatterns = [
    path("", views.trajectory_list, name="list"),
    path("<uuid:trajectory_id>/", views.trajectory_detail, name="detail"),
    path("<uuid:trajectory_id>/rescore/", views.rescore, name="rescore"),
    path("<uuid:trajectory_id>/replay/", views.replay, name="replay"),
    path("filters/", curation_views.save_filter, name="save-filter"),
    path("training-sets/", curation_views.training_set_list, name="training-sets"),
    path("training-sets/new/", curation_views.create_training_set, name="training-set-new"),
    path("training-sets/<slug:name>/<int:version>/", curation_views.training_set_detail, name="training-set"),
    path("training-sets/<slug:name>/<int:version>/export/", curation_views.training_set_export,
         name="training-set-export"),
]
