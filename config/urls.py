from django.contrib import admin
from django.urls import include, path

from config.api import api
from core import health

urlpatterns = [
    # For load balancers, orchestrators and Prometheus: no sign-in, no session, JSON.
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics_view, name="metrics"),
    path("api/v1/", api.urls),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("tasks_app.urls")),
    path("", include("switchboard.urls")),
]
