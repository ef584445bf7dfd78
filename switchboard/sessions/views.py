"""The sessions pages: the sessions list and the session page (with its tasks pane), its
actions and export. Parse, authorise (core.pages / sessions_app.access), render.

One template per page; htmx requests get a named partial of that same template
("…/session_detail.html#event-rows"), chosen by the element the request targets.
Domain errors (404 outside the project, 403 below the role, 409 on a refused transition)
are rendered by config.middleware.DashboardDomainErrorMiddleware, as a page or a fragment.
"""

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect

from core.actors import Actor
from core.errors import InvalidInput
from core.live_rows import live_query, render_started
from core.models import Role
from core.pages import (
    base_context,
    cursor_links,
    form_errors,
    htmx_partial_for,
    project_for,
    role_context,
)
from retention_app.services.deletion import delete_session
from sessions_app.access import get_session_for_user
from sessions_app.errors import Compacted
from sessions_app.http import artifact_response, jsonl_export_response
from sessions_app.models import Session
from sessions_app.queries import page_sessions
from sessions_app.services.artifacts import find_artifact
from sessions_app.services.lifecycle import close_session, pause_session, resume_session
from sessions_app.services.sessions import fork_session
from switchboard.sessions.context import (
    LogOptions,
    Moment,
    event_log,
    inspector_context,
    moment_at,
    session_header_context,
    session_page_context,
    timeline,
)
from switchboard.sessions.forms import (
    ArtifactForm,
    DeleteSessionForm,
    EventLogForm,
    ForkForm,
    InspectorForm,
    MomentForm,
    ReasonForm,
    SessionFilterForm,
)
from switchboard.sessions.queries import mark_holds, session_rows

SESSIONS_PER_PAGE = 50


# --- Sessions list --------------------------------------------------------------------------


@require_GET
@login_required
@vary_on_headers("HX-Request")
def session_list(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id)
    project = membership.project
    form = SessionFilterForm(project, request.GET)
    partial = htmx_partial_for(request, "session-results")
    template = "switchboard/session_list.html" + (f"#{partial}" if partial else "")
    context = base_context(request, membership, "sessions")
    context["form"] = form
    if not form.is_valid():
        context["errors"] = form_errors(form)
        return render(request, template, context, status=400)
    sort = form.cleaned_data["sort"]
    cursor = form.cleaned_data.get("cursor") or None
    rendered_at = render_started()  # before the read: what the page's socket catches up from
    sessions, next_cursor = page_sessions(
        session_rows(project, form.to_filters()),
        cursor=cursor,
        limit=SESSIONS_PER_PAGE,
        sort=sort,
    )
    mark_holds(project.pk, sessions)
    live_params = request.GET.copy()
    live_params["view"] = "sessions"
    context.update(
        {
            "sessions": sessions,
            **cursor_links(request, next_cursor),
            "is_first_page": cursor is None,
            "is_filtered": form.is_filtered,
            "ws_url": f"/ws/projects/{project.pk}/?"
            + live_query(live_params, rendered_at, sessions),
        }
    )
    return render(request, template, context)


# --- Session page ---------------------------------------------------------------------------


@require_GET
@login_required
@vary_on_headers("HX-Request")
def session_detail(request: HttpRequest, session_id: str) -> HttpResponse:
    """The session page, live or pinned to a moment (`?at=<seq>`: time travel).

    htmx requests get a part of it: the log (`#event-log`, its filters), or a moment
    (`#moment`: the moment's line plus every part with a past, swapped out of band).
    """
    session, membership = get_session_for_user(request.user, session_id)
    partial = htmx_partial_for(request, "event-log", "moment")
    moment, moment_problem, status = _moment(session, request)
    if partial == "moment" and status != 200:
        # Nothing else moves: the page stays at the moment it showed.
        context = {"session": session, "moment_problem": moment_problem}
        return render(request, "switchboard/session_detail.html#moment", context, status=status)
    form = EventLogForm(session, request.GET)
    valid = form.is_valid()
    at = moment.seq if moment else None
    options = LogOptions.from_cleaned(form.cleaned_data if valid else {}, at=at)
    context = {
        "session": session,
        "log_form": form,
        "log": event_log(session, options) if valid else None,
        "log_errors": [] if valid else form_errors(form),
        "moment": moment,
    }
    if not valid:
        status = 400
    if partial == "event-log":
        return render(request, "switchboard/session_detail.html#event-log", context, status=status)
    context.update(base_context(request, membership, "sessions"))
    context.update(session_page_context(session, membership, moment))
    context["moment_problem"] = moment_problem
    template = "switchboard/session_detail.html" + ("#moment-swap" if partial else "")
    return render(request, template, context, status=status)


@require_GET
@login_required
def session_artifact(request: HttpRequest, session_id: str, name: str) -> HttpResponse:
    """A version of an artifact (`?version=`, else the latest; `?at=` as of that seq), for any
    member: an attachment, except an image asked for `?inline=1` (the page's previews), and
    never with a type a browser would run (sessions_app.http.artifact_response)."""
    session, _ = get_session_for_user(request.user, session_id)
    form = ArtifactForm(session, request.GET)
    if not form.is_valid():
        raise InvalidInput(" ".join(form_errors(form)))
    artifact = find_artifact(
        session, name, version=form.cleaned_data["version"], at_seq=form.cleaned_data["at"]
    )
    return artifact_response(request, artifact, inline=form.cleaned_data["inline"])


def _moment(session: Session, request: HttpRequest) -> tuple[Moment | None, dict[str, Any], int]:
    """The moment `?at=` asks for: (moment, problem, status). A seq that cannot be shown gives
    no moment (the page is live) and a problem to say why: 400 for a bad value, 200 inside a
    compacted range (a real seq whose past retention removed; the message says which seqs
    around it can be shown)."""
    form = MomentForm(session, request.GET)
    if not form.is_valid():
        raw = request.GET.get("at", request.GET.get("at_seq", ""))
        return None, {"seq": str(raw)[:40], "message": " ".join(form_errors(form))}, 400
    at = form.cleaned_data.get("at")
    if at is None:
        return None, {}, 200
    try:
        return moment_at(session, at), {}, 200
    except Compacted as compacted:
        detail = compacted.detail or {}
        return (
            None,
            {
                "seq": str(at),
                "message": compacted.message,
                "compacted": True,
                "after_seq": detail.get("after_seq"),
                "through_seq": detail.get("through_seq"),
            },
            200,
        )


@require_GET
@login_required
@vary_on_headers("HX-Request")
def session_events(request: HttpRequest, session_id: str) -> HttpResponse:
    """The next slice of the log ("load more"): rows plus the next sentinel."""
    session, membership = get_session_for_user(request.user, session_id)
    if not request.htmx:  # type: ignore[attr-defined]
        # Without JavaScript the page itself takes the same slice parameters.
        return redirect(
            f"{reverse('dashboard:session_detail', args=[session.pk])}?{request.GET.urlencode()}"
        )
    form = EventLogForm(session, request.GET)
    if not form.is_valid():
        return render(
            request,
            "errors/_inline_error.html",
            {
                "title": "Check your input",
                "message": " ".join(form_errors(form)),
                "hint": "Reload the page to start again from the newest events.",
                "status": 400,
            },
            status=400,
        )
    log = event_log(session, LogOptions.from_cleaned(form.cleaned_data))
    return render(
        request, "switchboard/session_detail.html#event-rows", {"session": session, "log": log}
    )


@require_GET
@login_required
@vary_on_headers("HX-Request")
def session_inspector(request: HttpRequest, session_id: str) -> HttpResponse:
    """The working-state inspector at ?at_seq= (time travel)."""
    session, membership = get_session_for_user(request.user, session_id)
    form = InspectorForm(session, request.GET)
    if not request.htmx:  # type: ignore[attr-defined]
        return redirect(
            f"{reverse('dashboard:session_detail', args=[session.pk])}?"
            f"{urlencode({'at': request.GET.get('at_seq', '')})}"
        )
    if not form.is_valid():
        return render(
            request,
            "errors/_inline_error.html",
            {
                "title": "Check your input",
                "message": " ".join(form_errors(form)),
                "hint": "Pick a seq between 0 and the head.",
                "status": 400,
            },
            status=400,
        )
    context = inspector_context(session, form.cleaned_data.get("at_seq"))
    context.update(role_context(membership))
    return render(request, "switchboard/session_detail.html#inspector", context)


# --- Actions (operator and up) ------------------------------------------------------------


def _lifecycle_action(
    request: HttpRequest, session_id: str, operation: Callable[..., Session], done: str
) -> HttpResponse:
    session, membership = get_session_for_user(request.user, session_id, Role.OPERATOR)
    form = ReasonForm(request.POST)
    if not form.is_valid():
        return _bad_form(request, session, form)
    actor = Actor.for_user(request.user)  # type: ignore[arg-type]
    operation(session, actor=actor, reason=form.cleaned_data["reason"])
    if request.htmx:  # type: ignore[attr-defined]
        # A page pinned to a moment (it sends its `at`) keeps showing that moment: the action
        # changes the live session, which the header's "now" and the actions show.
        moment = _moment_of_form(session, request.POST)
        context = session_header_context(session, membership, moment)
        at = moment.seq if moment else None
        context.update({"action_message": done, "timeline": timeline(session, upto_seq=at)})
        return render(request, "switchboard/session_detail.html#action-result", context)
    messages.success(request, done)
    return redirect("dashboard:session_detail", session.pk)


def _moment_of_form(session: Session, data: Any) -> Moment | None:
    form = MomentForm(session, data)
    if not form.is_valid() or form.cleaned_data.get("at") is None:
        return None
    try:
        return moment_at(session, form.cleaned_data["at"])
    except Compacted:
        return None


def _bad_form(request: HttpRequest, session: Session, form: object) -> HttpResponse:
    context = {
        "title": "Check your input",
        "message": " ".join(form_errors(form)),
        "hint": "Nothing was changed. Correct it and try again.",
        "status": 400,
    }
    if request.htmx:  # type: ignore[attr-defined]
        return render(request, "errors/_inline_error.html", context, status=400)
    return render(request, "errors/domain_error.html", context, status=400)


@require_POST
@login_required
def session_pause(request: HttpRequest, session_id: str) -> HttpResponse:
    return _lifecycle_action(request, session_id, pause_session, "Session paused.")


@require_POST
@login_required
def session_resume(request: HttpRequest, session_id: str) -> HttpResponse:
    return _lifecycle_action(request, session_id, resume_session, "Session resumed.")


@require_POST
@login_required
def session_close(request: HttpRequest, session_id: str) -> HttpResponse:
    return _lifecycle_action(request, session_id, close_session, "Session closed.")


@require_POST
@login_required
def session_fork(request: HttpRequest, session_id: str) -> HttpResponse:
    """Fork at a seq and open the fork."""
    session, _ = get_session_for_user(request.user, session_id, Role.OPERATOR)
    form = ForkForm(session, request.POST)
    if not form.is_valid():
        return _bad_form(request, session, form)
    actor = Actor.for_user(request.user)  # type: ignore[arg-type]
    fork = fork_session(
        session, at_seq=form.cleaned_data["at_seq"], actor=actor, title=form.cleaned_data["title"]
    )
    messages.success(request, f"Forked at seq {fork.fork_seq}. This is the fork.")
    url = reverse("dashboard:session_detail", args=[fork.pk])
    if request.htmx:  # type: ignore[attr-defined]
        return HttpResponseClientRedirect(url)
    return redirect(url)


@require_POST
@login_required
def session_delete(request: HttpRequest, session_id: str) -> HttpResponse:
    """Delete the session whole (admins), as DELETE /api/v1/sessions/{id} does; then its list."""
    session, _ = get_session_for_user(request.user, session_id, Role.ADMIN)
    form = DeleteSessionForm(request.POST)
    if not form.is_valid():
        return _bad_form(request, session, form)
    deleted = delete_session(
        session.project_id,
        session.pk,
        actor=Actor.for_user(request.user),  # type: ignore[arg-type]
        with_forks=form.cleaned_data["with_forks"],
    )
    forks = len(deleted.session_ids) - 1
    messages.success(
        request,
        f"Session deleted{f' with {forks} fork(s)' if forks else ''}"
        f" ({deleted.events_deleted} events).",
    )
    url = reverse("dashboard:session_list", args=[session.project_id])
    if request.htmx:  # type: ignore[attr-defined]
        return HttpResponseClientRedirect(url)
    return redirect(url)


# --- Export (viewer and up) ---------------------------------------------------------------


@require_GET
@login_required
def session_export(request: HttpRequest, session_id: str) -> StreamingHttpResponse:
    session, _ = get_session_for_user(request.user, session_id)
    return jsonl_export_response(session, actor=Actor.for_user(request.user))  # type: ignore[arg-type]
