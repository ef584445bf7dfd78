"""The handoff digest page `/p/<id>/digest/`: a section of the project's settings (the
console's navigation), admins only, to read and to write — the addresses and the chat webhook
are configuration, like webhook endpoints. Parse, authorise (core.pages.project_for at ADMIN),
call handoffs_app.services.digest, render; a refusal re-renders the form with the service's
message (400) and saves nothing.
"""

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from core.errors import InvalidInput
from core.models import Membership, Role
from core.pages import base_context, form_errors, project_for
from handoffs_app.services.digest import INTERVALS, update_digest_settings
from handoffs_app.services.records import sla_for
from switchboard.console.context import settings_sections
from switchboard.digest.forms import DigestForm

TEMPLATE = "switchboard/handoff_digest.html"


def _page(request: HttpRequest, membership: Membership, form: DigestForm | None) -> dict[str, Any]:
    row = sla_for(membership.project_id)
    context = base_context(request, membership, "settings")
    context.update(
        {
            "section": "digest",
            "sections": settings_sections(membership),
            "form": form or DigestForm.for_settings(row),
            "digest": row,
            "interval_text": INTERVALS.get(row.digest_interval_seconds, ""),
            # Due already: the job's next run (within a minute) looks at it.
            "due_now": row.digest_due_at is not None and row.digest_due_at <= timezone.now(),
            "errors": form_errors(form) if form is not None else [],
        }
    )
    return context


@require_http_methods(["GET", "POST"])
@login_required
def handoff_digest(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    if request.method == "GET":
        return render(request, TEMPLATE, _page(request, membership, None))
    form = DigestForm(request.POST)
    if form.is_valid():
        try:
            update_digest_settings(
                project_id,
                user=request.user,  # type: ignore[arg-type]
                emails=form.email_list(),
                chat_url=form.cleaned_data["chat_url"],
                interval_seconds=form.cleaned_data["interval"],
            )
        except InvalidInput as refused:
            field = refused.detail.get("field") if isinstance(refused.detail, dict) else None
            form.add_error(field if field in form.fields else None, refused.message)
        else:
            messages.success(request, "Digest settings saved.")
            return redirect("dashboard:handoff_digest", project_id)
    return render(request, TEMPLATE, _page(request, membership, form), status=400)
