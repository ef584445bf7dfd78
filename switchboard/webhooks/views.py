"""The webhooks page: a project's endpoints and recent deliveries. Admins only, to read and to
write — endpoint URLs and delivery payloads are configuration, like API keys (DESIGN.md:
admins manage keys, members, policy). Parse, authorise (core.pages.project_for at ADMIN), call
core.services.webhooks, render.

The signing secret is rendered once, in the answer to the creation POST (no redirect, so it
is never put in the session or a message), with Cache-Control: no-store.
"""

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from core.actors import Actor
from core.errors import InvalidInput
from core.models import Membership, Role
from core.pages import base_context, form_errors, project_for
from core.services.webhooks import (
    create_endpoint,
    delete_endpoint,
    delivery_in,
    endpoint_in,
    project_endpoints,
    recent_deliveries,
    redeliver,
    set_endpoint_active,
)
from switchboard.console.context import settings_sections
from switchboard.webhooks.forms import WebhookEndpointForm, WebhookToggleForm

TEMPLATE = "switchboard/webhooks.html"


def _page(
    request: HttpRequest,
    membership: Membership,
    form: WebhookEndpointForm | None = None,
    **extra: Any,
) -> dict[str, Any]:
    project = membership.project
    # A section of the project's settings (the console's navigation), not a top-level page.
    context = base_context(request, membership, "settings")
    context.update(
        {
            "section": "webhooks",
            "sections": settings_sections(membership),
            "form": form or WebhookEndpointForm(),
            "endpoints": list(project_endpoints(project)),
            "deliveries": recent_deliveries(project),
            **extra,
        }
    )
    return context


@require_GET
@login_required
def webhooks(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    return render(request, TEMPLATE, _page(request, membership))


@require_POST
@login_required
@never_cache
def webhook_create(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    form = WebhookEndpointForm(request.POST)
    if form.is_valid():
        try:
            endpoint, secret = create_endpoint(
                membership.project,
                url=form.cleaned_data["url"],
                events=form.cleaned_data["events"],
                actor=Actor.for_user(request.user),  # type: ignore[arg-type]
            )
        except InvalidInput as refused:
            field = refused.detail.get("field") if isinstance(refused.detail, dict) else None
            form.add_error(field if field in form.fields else None, refused.message)
        else:
            context = _page(
                request,
                membership,
                new_endpoint=endpoint,
                new_secret=secret,
                unresolved_host=form.unresolved_host(),
            )
            return render(request, TEMPLATE, context, status=201)
    context = _page(request, membership, form, errors=form_errors(form))
    return render(request, TEMPLATE, context, status=400)


@require_POST
@login_required
def webhook_toggle(request: HttpRequest, project_id: int, endpoint_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    endpoint = endpoint_in(membership.project, endpoint_id)
    form = WebhookToggleForm(request.POST)
    if not form.is_valid():
        context = _page(request, membership, errors=form_errors(form))
        return render(request, TEMPLATE, context, status=400)
    active = form.cleaned_data["active"]
    set_endpoint_active(endpoint, active, actor=Actor.for_user(request.user))  # type: ignore[arg-type]
    messages.success(request, f"{'Enabled' if active else 'Disabled'} {endpoint.url}.")
    return redirect("dashboard:webhooks", membership.project_id)


@require_POST
@login_required
def webhook_delete(request: HttpRequest, project_id: int, endpoint_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    endpoint = endpoint_in(membership.project, endpoint_id)
    delete_endpoint(endpoint, actor=Actor.for_user(request.user))  # type: ignore[arg-type]
    messages.success(request, f"Deleted {endpoint.url} and its deliveries.")
    return redirect("dashboard:webhooks", membership.project_id)


@require_POST
@login_required
def webhook_redeliver(
    request: HttpRequest, project_id: int, delivery_id: uuid.UUID
) -> HttpResponse:
    """Send a delivery again now (same delivery id), waiting for the receiver's answer (at
    most SWITCHBOARD_WEBHOOK_TIMEOUT), and say how it went."""
    membership = project_for(request, project_id, Role.ADMIN)
    delivery = delivery_in(membership.project, delivery_id)
    attempt = redeliver(delivery, actor=Actor.for_user(request.user))  # type: ignore[arg-type]
    if attempt.succeeded:
        messages.success(request, f"Redelivered: the receiver answered {attempt.response_code}.")
    else:
        messages.error(request, f"Redelivery failed: {attempt.error}")
    return redirect("dashboard:webhooks", membership.project_id)
