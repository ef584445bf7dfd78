"""The retention page: the policy (admins edit it, with a preview first; others read), legal
holds, and the run history (a table and a chart of events freed per day). Parse, authorise
(core.pages.project_for), call retention_app's services, render."""

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from core.actors import Actor
from core.errors import InvalidInput, NotFound
from core.models import Membership, Role
from core.pages import base_context, form_errors, htmx_partial_for, project_for
from retention_app.models import POLICY_FIELDS, LegalHold, RunStatus
from retention_app.queries import (
    events_freed_per_day,
    recent_runs,
    standing_holds,
    unclaimed_runs,
)
from retention_app.services.holds import lift_hold, place_hold
from retention_app.services.jobs import JobsUnavailable, request_runs
from retention_app.services.policies import (
    parse_policy,
    policies_from,
    policy_document,
    project_policies,
    save_policy,
)
from retention_app.services.preview import preview
from sessions_app.models import Agent, Session
from switchboard.retention.forms import (
    LABELS,
    READ_LABELS,
    BaseAgentOverrideFormSet,
    HoldForm,
    LiftForm,
    PolicyForm,
    human,
    override_formset,
)

TEMPLATE = "switchboard/retention.html"


def live_context(project_id: int) -> dict[str, Any]:
    """The parts the page's websocket re-renders: runs, chart, holds."""
    now = timezone.now()
    days = events_freed_per_day(project_id, now=now)
    top = max((n for _, n in days), default=0) or 1
    runs = recent_runs(project_id, limit=30)
    return {
        "runs": runs,
        "unclaimed": unclaimed_runs(runs, now=now),
        "any_queued": any(run.status == RunStatus.QUEUED for run in runs),
        "retention_queue": settings.SWITCHBOARD_RETENTION_QUEUE,
        "chart": [
            {"day": day, "freed": n, "x": i * 10 + 1, "height": h, "y": 90 - h}
            for i, (day, n) in enumerate(days)
            for h in [round(80 * n / top)]
        ],
        "chart_width": 10 * len(days),
        "anything_freed": any(n for _, n in days),
        "holds": list(standing_holds(project_id)),
    }


def _agent_names(project_id: int) -> list[str]:
    return list(
        Agent.objects.filter(project_id=project_id).order_by("name").values_list("name", flat=True)
    )


def _problem_sentence(key: str, problem: str) -> str:
    """A problem parse_policy names by key ("agents.bot.delete_after") as a sentence."""
    parts = key.split(".")
    if parts[0] == "agents" and len(parts) >= 3:
        name = ".".join(parts[1:-1])
        label = LABELS.get(parts[-1], parts[-1])
        return f"Override for {name}: {label}: {problem}"
    if parts[0] == "agents" and len(parts) == 2:
        return f"Override for {parts[1]}: {problem}"
    return f"{LABELS.get(key, key)}: {problem}"


def _page(request: HttpRequest, membership: Membership, **extra: Any) -> dict[str, Any]:
    project = membership.project
    document = policy_document(project_policies(project))
    context = base_context(request, membership, "retention")
    overrides = extra.pop("overrides", None) or override_formset(_agent_names(project.pk), document)
    context.update(
        {
            "policy": document,
            "overrides": overrides,
            "policy_rows": [
                (READ_LABELS[name], human(name, document[name])) for name in POLICY_FIELDS
            ],
            "agent_rules": [
                (
                    agent,
                    [
                        (READ_LABELS.get(name, name), human(name, value))
                        for name, value in fields_set.items()
                    ],
                )
                for agent, fields_set in document["agents"].items()
            ],
            "form": extra.pop("form", None) or PolicyForm.for_policy(document),
            "hold_form": extra.pop("hold_form", None) or HoldForm(),
            "ws_url": f"/ws/projects/{project.pk}/retention/",
            **live_context(project.pk),
            **extra,
        }
    )
    return context


@require_GET
@login_required
@vary_on_headers("HX-Request")
def retention(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id)
    if htmx_partial_for(request, "retention-runs"):
        # Polled while a run is queued: it becomes unclaimed by the clock, with no change to
        # push.
        context = {"project": membership.project, **live_context(project_id)}
        return render(request, f"{TEMPLATE}#live-runs", context)
    return render(request, TEMPLATE, _page(request, membership))


@require_POST
@login_required
def retention_policy(request: HttpRequest, project_id: int) -> HttpResponse:
    """`action=preview` shows what the edited policy would do now; `action=save` saves it."""
    membership = project_for(request, project_id, Role.ADMIN)
    project = membership.project
    form = PolicyForm(request.POST)
    overrides: BaseAgentOverrideFormSet = override_formset(
        _agent_names(project.pk), data=request.POST
    )
    form_ok, overrides_ok = form.is_valid(), overrides.is_valid()
    if not (form_ok and overrides_ok):
        errors = form_errors(form) + overrides.errors_as_sentences()
        context = _page(request, membership, form=form, overrides=overrides, errors=errors)
        return render(request, TEMPLATE, context, status=400)
    document = form.document(overrides.overrides())
    try:
        if request.POST.get("action") == "save":
            save_policy(project, document, actor=Actor.for_user(request.user))  # type: ignore[arg-type]
            messages.success(request, "Retention policy saved.")
            return redirect("dashboard:retention", project.pk)
        parsed = parse_policy(project, document)
    except InvalidInput as refused:
        problems = refused.detail if isinstance(refused.detail, dict) else {}
        errors = [_problem_sentence(key, problem) for key, problem in problems.items()]
        context = _page(
            request, membership, form=form, overrides=overrides, errors=errors or [refused.message]
        )
        return render(request, TEMPLATE, context, status=400)
    result = preview(project, policies_from(parsed), now=timezone.now())
    context = _page(
        request,
        membership,
        form=form,
        overrides=overrides,
        preview=result.as_dict()["would"],
        preview_overrides=sorted(document["agents"]),
    )
    return render(request, TEMPLATE, context)


@require_POST
@login_required
def retention_run(request: HttpRequest, project_id: int) -> HttpResponse:
    """Queue both jobs over this project on the workers (the runs appear queued, then running,
    then finished, live); a broker that refuses them gets a message, not an error page."""
    membership = project_for(request, project_id, Role.ADMIN)
    trigger = Actor.for_user(request.user).label  # type: ignore[arg-type]
    try:
        request_runs(membership.project_id, trigger=trigger)
    except JobsUnavailable as refused:
        messages.error(request, refused.message)
    else:
        messages.success(
            request, "Retention queued: both jobs run on the workers; the runs below update live."
        )
    return redirect("dashboard:retention", membership.project_id)


@require_POST
@login_required
def retention_hold(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    project = membership.project
    form = HoldForm(request.POST)
    if not form.is_valid():
        context = _page(request, membership, hold_form=form, errors=form_errors(form))
        return render(request, TEMPLATE, context, status=400)
    data = form.cleaned_data
    session = agent = None
    if data["target"] == "session":
        session = Session.objects.filter(project=project, pk=data["session_id"]).first()
        if session is None:
            raise NotFound("No such session in this project.")
    elif data["target"] == "agent":
        agent = Agent.objects.filter(project=project, name=data["agent"]).first()
        if agent is None:
            raise NotFound("No such agent in this project.")
    place_hold(
        project,
        session=session,
        agent=agent,
        reason=data["reason"],
        actor=Actor.for_user(request.user),  # type: ignore[arg-type]
    )
    messages.success(request, "Legal hold placed.")
    return redirect("dashboard:retention", project.pk)


@require_POST
@login_required
def retention_lift(request: HttpRequest, project_id: int, hold_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    hold = LegalHold.objects.filter(project_id=membership.project_id, pk=hold_id).first()
    if hold is None:
        raise NotFound("No such hold in this project.")
    form = LiftForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    lift_hold(hold, actor=Actor.for_user(request.user), reason=reason)  # type: ignore[arg-type]
    messages.success(request, "Legal hold lifted.")
    return redirect("dashboard:retention", membership.project_id)
