from django.contrib import admin
from django.urls import include, path

from config.api import api

urlpatterns = [
    path("api/v1/", api.urls),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("tasks_app.urls")),
    path("", include("switchboard.urls")),
]

handler400 = "config.views.bad_request"
