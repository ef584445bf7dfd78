"""Dashboard views of human handoffs: the queue, the workspace, and the workspace's actions.

Parse (handoffs.forms), authorise (handoffs_app.access: 404 outside the project,
403 below the role), call handoffs_app's services, render. The services check the lease and
the answer types again; their refusals (409 someone else holds it, 422 answer not allowed) are
rendered by config.middleware.DashboardDomainErrorMiddleware as a fragment in #action-result.

Changes that deserve a second look (edited arguments, a state patch) are previewed first: the
form posted without `confirm` answers a diff and a confirm button, and changes nothing.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import reswap

from core.errors import InvalidInput
from core.models import Membership, Role
from core.pages import base_context, cursor_links, form_errors, htmx_partial_for, project_for
from handoffs_app.access import get_handoff_for_user
from handoffs_app.errors import HandoffNotActive, NotLeaseHolder
from handoffs_app.models import Handoff
from handoffs_app.queries import next_waiting_handoff, queue_counts, waiting_marks
from handoffs_app.services import handoffs as services
from switchboard.handoffs.context import (
    Preview,
    edit_preview,
    message_page,
    operators_of,
    queue_context,
    state_preview,
    workspace_context,
)
from switchboard.handoffs.forms import (
    SCHEMA_MARKER,
    BudgetForm,
    EditArgsForm,
    FactsForm,
    MessageForm,
    NextHandoffForm,
    PatchStateForm,
    QueueFilterForm,
    ReassignForm,
    RespondForm,
    args_from_fields,
    schema_edit_form,
)
from switchboard.sessions.forms import ReasonForm

QUEUE_PAGE = "switchboard/handoff_queue.html"
WORKSPACE_PAGE = "switchboard/handoff_workspace.html"


# --- Queue ---------------------------------------------------------------------------------


@require_GET
@login_required
@vary_on_headers("HX-Request")
def handoff_queue(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id)
    project = membership.project
    form = QueueFilterForm(request.GET)
    partial = htmx_partial_for(request, "queue-results")
    template = QUEUE_PAGE + (f"#{partial}" if partial else "")
    context = base_context(request, membership, "handoffs")
    context["form"] = form
    if not form.is_valid():
        context["errors"] = form_errors(form)
        return render(request, template, context, status=400)
    cursor = form.cleaned_data.get("cursor") or None
    try:
        context.update(
            queue_context(project.pk, form.to_filters(), user=request.user, cursor=cursor)
        )
    except InvalidInput as error:  # a cursor this server did not issue
        context["errors"] = [error.message]
        return render(request, template, context, status=400)
    request.handoff_counts = context["counts"]  # type: ignore[attr-defined]  (the navigation's)
    live_params = request.GET.copy()
    context.update(
        {
            **cursor_links(request, context["next_cursor"]),
            "is_first_page": cursor is None,
            "is_filtered": form.is_filtered,
            "ws_url": f"/ws/projects/{project.pk}/handoffs/?{live_params.urlencode()}",
        }
    )
    return render(request, template, context)


@require_GET
@login_required
def handoff_next(request: HttpRequest, project_id: int) -> HttpResponse:
    """The next waiting handoff this operator can claim (the keyboard's "n"): the first open
    one after `after` in the queue's order, or the top of the queue; back to the queue when
    nobody else is waiting. Operators only: a viewer can act on none."""
    membership = project_for(request, project_id, Role.OPERATOR)
    form = NextHandoffForm(request.GET)
    if not form.is_valid():
        return _bad_input(request, form_errors(form))
    after = None
    if form.cleaned_data["after"] is not None:
        after, _ = get_handoff_for_user(request.user, form.cleaned_data["after"])
        if after.project_id != membership.project_id:
            return _bad_input(request, ["After: that handoff is in another project."])
    found = next_waiting_handoff(membership.project_id, after=after)
    if found is None:
        messages.info(request, "Nobody else is waiting for a person right now.")
        return redirect("dashboard:handoff_queue", membership.project_id)
    return redirect("dashboard:handoff_detail", found.pk)


@require_GET
@login_required
@never_cache
def handoff_waiting(request: HttpRequest, project_id: int) -> HttpResponse:
    """The waiting handoffs as static/js/notify.js compares them: fetched once per page by a
    person who turned browser notifications on (the live feed brings the later lists), so
    pages cost nothing for everyone else. Any member."""
    membership = project_for(request, project_id)
    context = {"handoff_nav": {"marks": waiting_marks(membership.project_id)}}
    return render(request, "switchboard/_handoff_notify.html#notify-marks", context)


# --- Workspace -----------------------------------------------------------------------------


@require_GET
@login_required
def handoff_detail(request: HttpRequest, handoff_id: str) -> HttpResponse:
    handoff, membership = get_handoff_for_user(request.user, handoff_id)
    return _workspace_page(request, handoff, membership)


def _workspace_page(
    request: HttpRequest,
    handoff: Handoff,
    membership: Membership,
    *,
    preview: Preview | None = None,
    status: int = 200,
) -> HttpResponse:
    context = base_context(request, membership, "handoffs")
    context.update(workspace_context(handoff, membership, request.user))
    context["preview"] = preview
    return render(request, WORKSPACE_PAGE, context, status=status)


@require_GET
@login_required
def handoff_messages(request: HttpRequest, handoff_id: str) -> HttpResponse:
    """Older messages of the session ("load more"), oldest of them first."""
    handoff, _ = get_handoff_for_user(request.user, handoff_id)
    try:
        before = int(request.GET.get("before_seq", ""))
    except ValueError:
        return _bad_input(request, ["Before seq: enter a whole number."])
    if not request.htmx:  # type: ignore[attr-defined]
        return redirect("dashboard:handoff_detail", handoff.pk)
    context = {
        "handoff": handoff,
        "session": handoff.session,
        **message_page(handoff.session, before),
    }
    return render(request, f"{WORKSPACE_PAGE}#message-rows", context)


# --- Actions -------------------------------------------------------------------------------


class BadForm(Exception):
    def __init__(self, errors: list[str]) -> None:
        self.errors = errors


# An action returns a sentence (done), a Preview (shown, nothing changed) or None (renew: 204).
Outcome = str | Preview | None


def _valid(form: Any) -> Any:
    if not form.is_valid():
        raise BadForm(form_errors(form))
    return form.cleaned_data


def _claim(request: HttpRequest, h: Handoff) -> Outcome:
    services.claim_handoff(h, user=request.user)  # type: ignore[arg-type]
    return "You hold this handoff now. Your lease is renewed while this page is open."


def _release(request: HttpRequest, h: Handoff) -> Outcome:
    data = _valid(ReasonForm(request.POST))
    services.release_handoff(h, user=request.user, reason=data["reason"])  # type: ignore[arg-type]
    return "Released: the handoff is back in the queue."


def _renew(request: HttpRequest, h: Handoff) -> Outcome:
    services.renew_lease(h, user=request.user)  # type: ignore[arg-type]
    return None


def _renewed(request: HttpRequest, handoff: Handoff, membership: Membership) -> HttpResponse:
    """The renewed lease as the header shows it (its new end, and the time left that the
    page's lease keeper counts down); the rest of the page, an action's message, stays."""
    handoff, membership = get_handoff_for_user(request.user, handoff.pk)
    context = {**workspace_context(handoff, membership, request.user), "oob": True}
    response = render(request, f"{WORKSPACE_PAGE}#handoff-header", context)
    return reswap(response, "none")  # type: ignore[arg-type]


def _reassign(request: HttpRequest, h: Handoff) -> Outcome:
    form = ReassignForm(operators_of(h.project_id), request.POST)
    _valid(form)
    to_user = form.user()
    services.reassign_handoff(h, to_user=to_user, user=request.user)  # type: ignore[arg-type]
    return f"Reassigned to {to_user.get_username()}."


def _respond(request: HttpRequest, h: Handoff) -> Outcome:
    choices = h.payload.get("choices") if isinstance(h.payload, dict) else None
    data = _valid(RespondForm(choices, request.POST))
    services.respond(h, user=request.user, text=data["text"], choice=data.get("choice") or None)  # type: ignore[arg-type]
    return "Answered. Hand the session back when you are done."


def _accept(request: HttpRequest, h: Handoff) -> Outcome:
    services.accept(h, user=request.user)  # type: ignore[arg-type]
    return "Approved as proposed. Hand the session back when you are done."


def _reject(request: HttpRequest, h: Handoff) -> Outcome:
    data = _valid(ReasonForm(request.POST))
    services.reject(h, user=request.user, reason=data["reason"])  # type: ignore[arg-type]
    return "Rejected: the agent will not take the action."


def _ignore(request: HttpRequest, h: Handoff) -> Outcome:
    services.ignore(h, user=request.user)  # type: ignore[arg-type]
    return "Ignored: the handoff is over and the agent goes on without the action."


def _edit(request: HttpRequest, h: Handoff) -> Outcome:
    schema_form = schema_edit_form(h)
    if schema_form is not None and request.POST.get("fields") == SCHEMA_MARKER:
        # The schema's fields: typed and checked against it here, so a refusal names the
        # field; then previewed like raw JSON (whose confirm the service checks again).
        try:
            args = args_from_fields(h, schema_form, request.POST)
        except ValidationError as refused:
            raise BadForm(refused.messages) from None
        return edit_preview(h, args)
    data = _valid(EditArgsForm(request.POST))
    if not data.get("confirm"):
        return edit_preview(h, data["args"])
    services.edit_and_accept(h, user=request.user, args=data["args"])  # type: ignore[arg-type]
    return "Approved with your edited arguments. Hand the session back when you are done."


def _budget(request: HttpRequest, h: Handoff) -> Outcome:
    data = _valid(BudgetForm(request.POST))
    services.approve_budget(
        h,
        user=request.user,  # type: ignore[arg-type]
        max_tokens=data.get("max_tokens"),
        max_cost=data.get("max_cost"),
    )
    return "Budget approved. Hand the session back when you are done."


def _state(request: HttpRequest, h: Handoff) -> Outcome:
    data = _valid(PatchStateForm(request.POST))
    if not data.get("confirm"):
        return state_preview(h.session, data["patch"])
    services.patch_state(h, user=request.user, patch=data["patch"])  # type: ignore[arg-type]
    return "Working state patched."


def _facts(request: HttpRequest, h: Handoff) -> Outcome:
    form = FactsForm(request.POST)
    _valid(form)
    services.add_facts(h, user=request.user, facts=form.facts())  # type: ignore[arg-type]
    return "Fact recorded."


def _take_over(request: HttpRequest, h: Handoff) -> Outcome:
    services.take_over(h, user=request.user)  # type: ignore[arg-type]
    return "You have taken the session over: the agent is kept out until you hand it back."


def _message(request: HttpRequest, h: Handoff) -> Outcome:
    data = _valid(MessageForm(request.POST))
    services.send_human_message(h, user=request.user, text=data["text"])  # type: ignore[arg-type]
    return "Message sent."


def _hand_back(request: HttpRequest, h: Handoff) -> Outcome:
    data = _valid(ReasonForm(request.POST))
    services.hand_back(h, user=request.user, reason=data["reason"])  # type: ignore[arg-type]
    return "Handed back: the session is resumed for the agent."


def _close(request: HttpRequest, h: Handoff) -> Outcome:
    data = _valid(ReasonForm(request.POST))
    services.close_handoff(h, user=request.user, reason=data["reason"])  # type: ignore[arg-type]
    return "Closed: the handoff and its session are closed."


# name → (URL segment, least role, handler)
ACTIONS: dict[str, tuple[str, str, Callable[[HttpRequest, Handoff], Outcome]]] = {
    "claim": ("claim", Role.OPERATOR, _claim),
    "release": ("release", Role.OPERATOR, _release),
    "renew": ("renew", Role.OPERATOR, _renew),
    "reassign": ("reassign", Role.ADMIN, _reassign),
    "respond": ("respond", Role.OPERATOR, _respond),
    "accept": ("accept", Role.OPERATOR, _accept),
    "reject": ("reject", Role.OPERATOR, _reject),
    "ignore": ("ignore", Role.OPERATOR, _ignore),
    "edit": ("edit", Role.OPERATOR, _edit),
    "budget": ("budget", Role.OPERATOR, _budget),
    "state": ("state", Role.OPERATOR, _state),
    "facts": ("facts", Role.OPERATOR, _facts),
    "take_over": ("take-over", Role.OPERATOR, _take_over),
    "message": ("message", Role.OPERATOR, _message),
    "hand_back": ("hand-back", Role.OPERATOR, _hand_back),
    "close": ("close", Role.OPERATOR, _close),
}


@require_POST
@login_required
def handoff_action(request: HttpRequest, handoff_id: str, action: str) -> HttpResponse:
    _, minimum, handler = ACTIONS[action]
    handoff, membership = get_handoff_for_user(request.user, handoff_id, minimum)
    htmx = bool(request.htmx)  # type: ignore[attr-defined]
    try:
        outcome = handler(request, handoff)
    except BadForm as bad:
        return _bad_input(request, bad.errors)
    except (NotLeaseHolder, HandoffNotActive) as refused:
        if not htmx:
            raise
        # The claim is gone (lapsed, taken, over): say so with the page as it now is (a Claim
        # button when it can be claimed again); the forms keep what was typed.
        handoff, membership = get_handoff_for_user(request.user, handoff.pk)
        context = workspace_context(handoff, membership, request.user)
        context["action_error"] = f"{refused.message} Nothing was sent; what you typed is kept."
        context["handoff_nav"] = nav_counts(handoff.project_id)
        return render(request, f"{WORKSPACE_PAGE}#action-result", context, status=409)
    if outcome is None:
        if htmx and action == "renew":
            return _renewed(request, handoff, membership)
        return (
            HttpResponse(status=204) if htmx else redirect("dashboard:handoff_detail", handoff.pk)
        )
    # Re-read: the services updated their own locked copy of the row.
    handoff, membership = get_handoff_for_user(request.user, handoff.pk)
    if isinstance(outcome, Preview):
        if not htmx:
            return _workspace_page(request, handoff, membership, preview=outcome)
        return render(
            request,
            f"{WORKSPACE_PAGE}#preview",
            {"handoff": handoff, "preview": outcome},
        )
    if not htmx:
        messages.success(request, outcome)
        return redirect("dashboard:handoff_detail", handoff.pk)
    context = workspace_context(handoff, membership, request.user)
    context["action_message"] = outcome
    context["handoff_nav"] = nav_counts(handoff.project_id)  # a claim changes the count
    return render(request, f"{WORKSPACE_PAGE}#action-result", context)


def _bad_input(request: HttpRequest, errors: list[str]) -> HttpResponse:
    context = {
        "title": "Check your input",
        "message": " ".join(errors),
        "hint": "Nothing was changed. Correct it and try again.",
        "status": 400,
    }
    if request.htmx:  # type: ignore[attr-defined]
        return render(request, "errors/_inline_error.html", context, status=400)
    return render(request, "errors/domain_error.html", context, status=400)


def workspace_frame(handoff: Handoff, membership: Membership, user: Any, parts: list[str]) -> str:
    """The named partials of the workspace, as out-of-band swaps (the consumer's push)."""
    context = {**workspace_context(handoff, membership, user), "oob": True}
    frame = [render_to_string(f"{WORKSPACE_PAGE}#{name}", context) for name in parts]
    if "handoff-header" in parts:
        context["handoff_nav"] = nav_counts(handoff.project_id)
        frame.append(render_to_string("_base.html#nav-handoff-count", context))
    return "".join(frame)


@dataclass
class NavCounts:
    """What the navigation's count shows (the context processor's shape, without a request)."""

    open: int
    overdue: int


def nav_counts(project_id: int) -> NavCounts:
    counts = queue_counts(project_id)
    return NavCounts(open=counts.open, overdue=counts.overdue)


__all__ = [
    "ACTIONS",
    "handoff_action",
    "handoff_detail",
    "handoff_messages",
    "handoff_next",
    "handoff_queue",
]
