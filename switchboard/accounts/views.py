"""The account pages: sign-in, Django's, throttled (core.ratelimit); and accepting an
invitation: the e-mailed link, then a page to choose a password (Django's
SetPasswordForm and its validators), then signed in on the project.

As Django's PasswordResetConfirmView does, the link's token is moved into the session and the
browser sent on to a URL without it, so the token never reaches another site in a Referer. A
link that no longer works (used, expired, revoked, mistyped) gets a page saying so, 404.
"""

import math
from typing import Any
from uuid import UUID

from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.contrib.auth.forms import AuthenticationForm, SetPasswordForm
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_http_methods

from core.client_address import client_address
from core.ratelimit import forget_signin_failures, record_signin_failure, signin_lockout
from core.services.invitations import (
    InvitationLinkInvalid,
    accept_invitation,
    expires_at,
    invitation_for_link,
    link_lifetime,
)
from switchboard.console.context import duration_text


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


# The session key holding the token between the link and the password page.
INVITATION_SESSION_KEY = "switchboard.invitation"
SET_PASSWORD_PAGE = "registration/invitation_set_password.html"
INVALID_PAGE = "registration/invitation_invalid.html"


def _link_invalid(request: HttpRequest) -> HttpResponse:
    lifetime = duration_text(int(link_lifetime().total_seconds()))
    return render(request, INVALID_PAGE, {"lifetime": lifetime}, status=404)


@never_cache
@require_GET
def invitation_link(request: HttpRequest, invitation_id: UUID, token: str) -> HttpResponse:
    try:
        invitation_for_link(invitation_id, token)
    except InvitationLinkInvalid:
        return _link_invalid(request)
    request.session[INVITATION_SESSION_KEY] = {"invitation": str(invitation_id), "token": token}
    return redirect("invitation_set_password", invitation_id)


@never_cache
@sensitive_post_parameters("new_password1", "new_password2")
@require_http_methods(["GET", "POST"])
def invitation_set_password(request: HttpRequest, invitation_id: UUID) -> HttpResponse:
    stored = request.session.get(INVITATION_SESSION_KEY) or {}
    token = str(stored.get("token", "")) if stored.get("invitation") == str(invitation_id) else ""
    try:
        invitation = invitation_for_link(invitation_id, token)
    except InvitationLinkInvalid:
        return _link_invalid(request)
    form = SetPasswordForm(invitation.user, request.POST if request.method == "POST" else None)
    if form.is_valid():
        try:
            accept_invitation(invitation, token=token, password=form.cleaned_data["new_password1"])
        except InvitationLinkInvalid:
            return _link_invalid(request)
        del request.session[INVITATION_SESSION_KEY]
        # The row as the service left it: the session keeps a hash of the new password.
        login(request, get_user_model().objects.get(pk=invitation.user_id))
        messages.success(
            request,
            f"Welcome to {invitation.project.name}. You are signed in as "
            f"{invitation.user.get_username()}.",
        )
        return redirect("dashboard:overview", invitation.project_id)
    context: dict[str, Any] = {
        "form": form,
        "invitation": invitation,
        "expires_at": expires_at(invitation),
    }
    return render(
        request, SET_PASSWORD_PAGE, context, status=400 if request.method == "POST" else 200
    )
