from django.urls import path

from . import views

app_name = "tasks"

urlpatterns = [
    # Viewer and up; read-only (agents drive tasks through the API).
    path("p/<int:project_id>/tasks/", views.task_list, name="list"),
    path("tasks/<uuid:task_id>/", views.task_detail, name="detail"),
]
