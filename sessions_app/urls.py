from django.urls import path

from . import views

app_name = "dashboard"

urlpatterns = [
    path("", views.home, name="home"),
    path("switch/", views.switch_project, name="switch_project"),
    path("p/<int:project_id>/", views.overview, name="overview"),
]
