from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from config.api import api
from core import health
from switchboard.accounts import views as accounts

urlpatterns = [
    # For load balancers, orchestrators and Prometheus: no sign-in, no session, JSON.
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics_view, name="metrics"),
    path("api/v1/", api.urls),
    # One sign-in page for everyone, so the admin's own form cannot bypass the throttle.
    path("admin/login/", RedirectView.as_view(pattern_name="login", query_string=True)),
    path("admin/", admin.site.urls),
    # Before Django's auth URLs: the sign-in that throttles failures (switchboard.accounts.views).
    path("accounts/login/", accounts.SignInView.as_view(), name="login"),
    # An invitation's e-mailed link, then its password page (the token moved into the session;
    # this path first: "set-password" would otherwise read as a token).
    path(
        "accounts/invitations/<uuid:invitation_id>/set-password/",
        accounts.invitation_set_password,
        name="invitation_set_password",
    ),
    path(
        "accounts/invitations/<uuid:invitation_id>/<str:token>/",
        accounts.invitation_link,
        name="invitation_link",
    ),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("tasks_app.urls")),
    path("", include("switchboard.urls")),
]

handler400 = "config.views.bad_request"
handler500 = "config.views.server_error"
