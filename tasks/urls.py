from django.urls import path

from tasks import views

app_name = "tasks"
urlpatterns = [
    path("", views.suite_list, name="suite-list"),
    path("<slug:suite>/", views.suite_detail, name="suite-detail"),
    path("<slug:suite>/validate/", views.validate_suite, name="validate-suite"),
    path("<slug:suite>/validation/<int:run_id>/", views.validation_run, name="validation-run"),
    path("<slug:suite>/<str:task_id>/", views.task_detail, name="task-detail"),
    path("<slug:suite>/<str:task_id>/files/<path:file_path>", views.task_file, name="task-file"),
]
