"""The erasure page (admins only): name a data subject, preview what would be erased, confirm,
follow the erasures and download their receipts. Parse, authorise (core.pages.project_for,
admin), call retention_app's erasure service, render."""

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from core.actors import Actor
from core.errors import InvalidInput
from core.models import Membership, Role
from core.pages import base_context, form_errors, project_for
from retention_app.erasure_api import receipt_response
from retention_app.erasure_queries import erasure_dict, erasure_in_project, recent_erasures
from retention_app.errors import ErasureHeld
from retention_app.services.erasure import JobsUnavailable, preview_erasure, request_erasure
from switchboard.erasure.forms import SubjectForm

TEMPLATE = "switchboard/erasure.html"


# The preview's counts by kind, in words (a kind not listed shows as it is named).
KIND_LABELS = {
    "sessions": "Sessions",
    "events": "Events",
    "facts": "Facts",
    "artifacts": "Artifact versions",
    "blobs": "Blobs",
    "compactions": "Compactions",
    "handoffs": "Handoffs",
    "handoffviewers": "Handoff viewers",
    "legalholds": "Legal holds on them",
    "snapshots": "Snapshots",
    "tasksessions": "Links to tasks",
    "audit_entries": "Audit entries (kept, pseudonymised)",
    "webhook_deliveries": "Webhook deliveries (bodies removed)",
}


def _page(request: HttpRequest, membership: Membership, **extra: Any) -> dict[str, Any]:
    preview = extra.get("preview")
    if preview:
        extra["preview_rows"] = [
            (KIND_LABELS.get(kind, kind), n) for kind, n in preview["counts"].items()
        ]
    return {
        **base_context(request, membership, "retention"),
        "form": extra.pop("form", None) or SubjectForm(),
        "erasures": [erasure_dict(e) for e in recent_erasures(membership.project_id)],
        **extra,
    }


@require_GET
@login_required
def erasure(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    return render(request, TEMPLATE, _page(request, membership))


def _selectors(request: HttpRequest, membership: Membership) -> tuple[SubjectForm, Any]:
    form = SubjectForm(request.POST)
    return form, form.selectors() if form.is_valid() else None


@require_POST
@login_required
def erasure_preview(request: HttpRequest, project_id: int) -> HttpResponse:
    """What would be erased, and a confirm button carrying the same selectors."""
    membership = project_for(request, project_id, Role.ADMIN)
    form, selectors = _selectors(request, membership)
    if selectors is None:
        context = _page(request, membership, form=form, errors=form_errors(form))
        return render(request, TEMPLATE, context, status=400)
    try:
        result = preview_erasure(membership.project_id, selectors)
    except InvalidInput as refused:
        context = _page(request, membership, form=form, errors=[refused.message])
        return render(request, TEMPLATE, context, status=400)
    context = _page(request, membership, form=form, preview=result.as_dict())
    return render(request, TEMPLATE, context)


@require_POST
@login_required
def erasure_confirm(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    form, selectors = _selectors(request, membership)
    if selectors is None or request.POST.get("confirm") != "yes":
        errors = form_errors(form) if selectors is None else ["Tick the box to confirm."]
        context = _page(request, membership, form=form, errors=errors)
        return render(request, TEMPLATE, context, status=400)
    actor = Actor.for_user(request.user)  # type: ignore[arg-type]
    try:
        done = request_erasure(membership.project, selectors, actor=actor)
    except ErasureHeld as held:
        context = _page(request, membership, form=form, errors=[held.message], holds=held.detail)
        return render(request, TEMPLATE, context, status=409)
    except JobsUnavailable as refused:
        messages.error(request, refused.message)
    except InvalidInput as refused:
        context = _page(request, membership, form=form, errors=[refused.message])
        return render(request, TEMPLATE, context, status=400)
    else:
        messages.success(request, f"Erasure {done.pk} queued: the list below shows its progress.")
    return redirect("dashboard:erasure", membership.project_id)


@require_GET
@login_required
def erasure_receipt(
    request: HttpRequest, project_id: int, erasure_id: str
) -> StreamingHttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    return receipt_response(erasure_in_project(membership.project_id, erasure_id))
