"""Sign-in: Django's, throttled (core.ratelimit)."""

import math
from typing import Any

from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from core.client_address import client_address
from core.ratelimit import forget_signin_failures, record_signin_failure, signin_lockout


class SignInView(LoginView):
    """Django's sign-in, refused (429, a page saying when to retry) while the account or the
    client address has too many recent failures (core.ratelimit). The address is
    core.client_address's: behind a reverse proxy listed in SWITCHBOARD_TRUSTED_PROXIES, the
    client's from X-Forwarded-For; else the connection's (a forged header changes nothing)."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        lockout = signin_lockout(_username(request), client_address(request))
        if lockout is not None:
            minutes = math.ceil(lockout.retry_after / 60)
            response = render(
                request,
                "registration/login_throttled.html",
                {"scope": lockout.scope, "minutes": minutes},
                status=429,
            )
            response["Retry-After"] = str(lockout.retry_after)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        record_signin_failure(_username(self.request), client_address(self.request))
        return super().form_invalid(form)

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        forget_signin_failures(_username(self.request))
        return super().form_valid(form)


def _username(request: HttpRequest) -> str:
    return str(request.POST.get("username", ""))
