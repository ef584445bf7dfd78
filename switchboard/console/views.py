"""The project console: settings, members, API keys and the audit log. Parse, authorise
(core.pages.project_for with the role each page needs), call a service, render.

Who may do what: every member reads the settings and the member list; admins rename the
project, manage members and keys, and read the audit log. A refused change (the last admin, a
duplicate member, an unknown user, an expiry in the past) re-renders its page with the
service's message and the status of the refusal (400, or 409 for a conflict): nothing changed.
"""

import contextlib
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from core.actors import Actor
from core.errors import Conflict, DomainError, NotFound
from core.live_rows import live_query, render_started
from core.models import ApiKey, Membership, Role
from core.pages import base_context, form_errors, htmx_partial_for, project_for, user_projects
from core.queries import filter_audit, page_audit, project_api_keys, project_members
from core.services.invitations import (
    InvitationNotSent,
    add_or_invite,
    expires_at,
    invitation_in,
    link_lifetime,
    pending_invitations,
    resend_invitation,
    revoke_invitation,
)
from core.services.members import change_member_role, remove_member
from core.services.projects import (
    api_key_in,
    create_api_key,
    create_project,
    rename_project,
    revoke_api_key,
)
from core.services.webhooks import project_endpoints
from handoffs_app.services.records import sla_for
from handoffs_app.services.sla import DEFAULT_LIMITS, FIELDS, LIMITS, update_handoff_settings
from switchboard.console.context import (
    KNOWN_ACTIONS,
    KNOWN_TARGET_TYPES,
    audit_rows,
    duration_text,
    settings_sections,
)
from switchboard.console.forms import (
    HANDOFF_SETTING_LABELS,
    ApiKeyCreateForm,
    AuditFilterForm,
    HandoffSettingsForm,
    MemberAddForm,
    MemberRoleForm,
    NewProjectForm,
    ProjectNameForm,
    handoff_minutes_field,
)

AUDIT_PER_PAGE = 50
SETTINGS_PAGE = "switchboard/project_settings.html"
MEMBERS_PAGE = "switchboard/members.html"
KEYS_PAGE = "switchboard/api_keys.html"
AUDIT_PAGE = "switchboard/audit_log.html"
NEW_PROJECT_PAGE = "switchboard/new_project.html"
CONSOLE_EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"


def _actor(request: HttpRequest) -> Actor:
    return Actor.for_user(request.user)  # type: ignore[arg-type]


def _refusal_status(error: DomainError) -> int:
    return 409 if isinstance(error, Conflict) else 400


def _console_context(request: HttpRequest, membership: Membership, section: str) -> dict[str, Any]:
    context = base_context(request, membership, "settings")
    context["section"] = section
    context["sections"] = settings_sections(membership)
    return context


# --- Settings ---------------------------------------------------------------------------------


HANDOFF_LIMITS = {name: LIMITS.get(name, DEFAULT_LIMITS) for name in FIELDS}


def _handoff_settings_form(
    project_id: int, data: Any = None, errors: list[str] | None = None
) -> HandoffSettingsForm:
    current = sla_for(project_id)
    initial = {handoff_minutes_field(name): getattr(current, name) // 60 for name in FIELDS}
    return HandoffSettingsForm(data, initial=initial, limits=HANDOFF_LIMITS)


def _settings_page(
    request: HttpRequest,
    membership: Membership,
    form: ProjectNameForm | None,
    status: int = 200,
    *,
    handoff_form: HandoffSettingsForm | None = None,
    handoff_errors: list[str] | None = None,
) -> HttpResponse:
    context = _console_context(request, membership, "settings")
    project = membership.project
    context["form"] = form or ProjectNameForm(initial={"name": project.name})
    context["errors"] = form_errors(form) if form is not None else []
    current = sla_for(project.pk)
    context["handoff_form"] = handoff_form or _handoff_settings_form(project.pk)
    context["handoff_errors"] = handoff_errors or []
    context["handoff_settings"] = [
        (label, duration_text(getattr(current, name)))
        for name, label in HANDOFF_SETTING_LABELS.items()
    ]
    if context["is_admin"]:
        endpoints = list(project_endpoints(project).only("active"))
        context["webhook_counts"] = {
            "total": len(endpoints),
            "active": sum(1 for e in endpoints if e.active),
        }
    return render(request, SETTINGS_PAGE, context, status=status)


@require_GET
@login_required
def project_settings(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id)
    return _settings_page(request, membership, None)


@require_POST
@login_required
def project_rename(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    form = ProjectNameForm(request.POST)
    if not form.is_valid():
        return _settings_page(request, membership, form, 400)
    try:
        rename_project(membership.project, name=form.cleaned_data["name"], actor=_actor(request))
    except DomainError as error:
        form.add_error(None, error.message)
        return _settings_page(request, membership, form, _refusal_status(error))
    messages.success(request, "Project renamed.")
    return redirect("dashboard:project_settings", project_id)


@require_POST
@login_required
def project_handoff_settings(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    form = _handoff_settings_form(project_id, request.POST)
    if not form.is_valid():
        return _settings_page(
            request, membership, None, 400, handoff_form=form, handoff_errors=form_errors(form)
        )
    changed = form.changed_seconds()
    if changed:
        try:
            update_handoff_settings(project_id, user=request.user, **changed)  # type: ignore[arg-type]
        except DomainError as error:
            return _settings_page(
                request,
                membership,
                None,
                _refusal_status(error),
                handoff_form=form,
                handoff_errors=[error.message],
            )
        messages.success(request, "Handoff settings saved.")
    else:
        messages.info(request, "Nothing to save: the handoff settings are unchanged.")
    return redirect(f"{reverse('dashboard:project_settings', args=[project_id])}#handoff-settings")


# --- Members ----------------------------------------------------------------------------------


def _members_page(
    request: HttpRequest,
    membership: Membership,
    form: MemberAddForm | None = None,
    errors: list[str] | None = None,
    status: int = 200,
) -> HttpResponse:
    context = _console_context(request, membership, "members")
    context["members"] = project_members(membership.project)
    context["add_form"] = form or MemberAddForm()
    context["errors"] = errors if errors is not None else (form_errors(form) if form else [])
    context["roles"] = Role.choices
    if context["is_admin"]:
        context["invitation_lifetime"] = duration_text(int(link_lifetime().total_seconds()))
        now = timezone.now()
        context["invitations"] = [
            {"invitation": i, "expires_at": expires_at(i), "expired": expires_at(i) <= now}
            for i in pending_invitations(membership.project)
        ]
    return render(request, MEMBERS_PAGE, context, status=status)


def _site_url(request: HttpRequest) -> str:
    """The address this console was opened at: invitation links start with it."""
    return request.build_absolute_uri("/")


def _sent_note(email: str) -> str:
    if settings.EMAIL_BACKEND == CONSOLE_EMAIL_BACKEND:
        # scripts/run: no mail server; say where the link went, or the demo's user waits for it.
        return (
            f"Invitation for {email} written to the server's console output (no EMAIL_HOST is "
            "set): copy its link from there."
        )
    return f"Invitation e-mailed to {email}."


def _member_of(membership: Membership, member_id: int) -> Membership:
    """A member of the page's project (404 for any other id: nothing leaks across projects)."""
    if not 0 < member_id < 2**63:
        raise NotFound("Member not found.")
    member = (
        Membership.objects.select_related("user", "project")
        .filter(pk=member_id, project_id=membership.project_id)
        .first()
    )
    if member is None:
        raise NotFound("Member not found.")
    return member


@require_GET
@login_required
def members(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id)
    return _members_page(request, membership)


@require_POST
@login_required
def member_add(request: HttpRequest, project_id: int) -> HttpResponse:
    """Add an existing user, or invite an e-mail address that has no account yet."""
    membership = project_for(request, project_id, Role.ADMIN)
    form = MemberAddForm(request.POST)
    if not form.is_valid():
        return _members_page(request, membership, form, status=400)
    role = form.cleaned_data["role"]
    try:
        outcome = add_or_invite(
            membership.project,
            form.cleaned_data["user"],
            role=role,
            actor=_actor(request),
            base_url=_site_url(request),
        )
    except InvitationNotSent as error:
        messages.warning(request, error.message)  # saved and listed: Resend once mail works
        return redirect(f"{reverse('dashboard:members', args=[project_id])}#invitations")
    except DomainError as error:
        form.add_error(None, error.message)
        return _members_page(request, membership, form, status=_refusal_status(error))
    if outcome.invitation is not None:
        messages.success(request, f"{_sent_note(outcome.invitation.email)} Role: {role}.")
        return redirect(f"{reverse('dashboard:members', args=[project_id])}#invitations")
    assert outcome.membership is not None
    messages.success(request, f"{outcome.membership.user.get_username()} added as {role}.")
    return redirect("dashboard:members", project_id)


@require_POST
@login_required
def invitation_resend(request: HttpRequest, project_id: int, invitation_id: UUID) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    invitation = invitation_in(membership.project_id, invitation_id)
    try:
        resend_invitation(invitation, actor=_actor(request), base_url=_site_url(request))
    except InvitationNotSent as error:
        messages.warning(request, error.message)
    else:
        messages.success(request, f"{_sent_note(invitation.email)} The new link expires later.")
    return redirect(f"{reverse('dashboard:members', args=[project_id])}#invitations")


@require_POST
@login_required
def invitation_revoke(request: HttpRequest, project_id: int, invitation_id: UUID) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    invitation = invitation_in(membership.project_id, invitation_id)
    revoke_invitation(invitation, actor=_actor(request))
    messages.success(
        request, f"Invitation for {invitation.email} revoked: its link no longer works."
    )
    return redirect(f"{reverse('dashboard:members', args=[project_id])}#invitations")


@require_POST
@login_required
def member_role(request: HttpRequest, project_id: int, member_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    member = _member_of(membership, member_id)
    form = MemberRoleForm(request.POST)
    if not form.is_valid():
        return _members_page(request, membership, errors=form_errors(form), status=400)
    try:
        change_member_role(member, role=form.cleaned_data["role"], actor=_actor(request))
    except DomainError as error:
        return _members_page(
            request, membership, errors=[error.message], status=_refusal_status(error)
        )
    messages.success(request, f"{member.user.get_username()} is now {member.role}.")
    if member.user_id == request.user.pk and member.role != Role.ADMIN:
        return redirect("dashboard:overview", project_id)  # no longer allowed on this page's forms
    return redirect("dashboard:members", project_id)


@require_POST
@login_required
def member_remove(request: HttpRequest, project_id: int, member_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    member = _member_of(membership, member_id)
    try:
        remove_member(member, actor=_actor(request))
    except DomainError as error:
        return _members_page(
            request, membership, errors=[error.message], status=_refusal_status(error)
        )
    messages.success(request, f"{member.user.get_username()} removed from the project.")
    if member.user_id == request.user.pk and not request.user.is_superuser:  # type: ignore[union-attr]
        return redirect("dashboard:home")
    return redirect("dashboard:members", project_id)


# --- API keys ---------------------------------------------------------------------------------


def _keys_page(
    request: HttpRequest,
    membership: Membership,
    form: ApiKeyCreateForm | None = None,
    *,
    created: tuple[ApiKey, str] | None = None,
    errors: list[str] | None = None,
    status: int = 200,
) -> HttpResponse:
    context = _console_context(request, membership, "keys")
    context["keys"] = project_api_keys(membership.project)
    context["form"] = form or ApiKeyCreateForm()
    context["errors"] = errors if errors is not None else (form_errors(form) if form else [])
    if created is not None:
        context["created_key"], context["secret"] = created
    return render(request, KEYS_PAGE, context, status=status)


# Where a new key's secret waits for the one page that shows it (POST, redirect, GET).
NEW_KEY_SESSION = "switchboard.new_api_key"


@never_cache  # right after a creation the answer holds the key's secret
@require_GET
@login_required
def api_keys(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    # Popped as it is shown: a reload shows the prefix only, and creates nothing.
    waiting = request.session.get(NEW_KEY_SESSION)
    created = None
    if waiting and waiting.get("project") == membership.project_id:
        del request.session[NEW_KEY_SESSION]
        with contextlib.suppress(NotFound):  # deleted meanwhile: nothing to show
            created = (api_key_in(membership.project, int(waiting["key"])), str(waiting["secret"]))
    return _keys_page(request, membership, created=created)


@never_cache  # the answer holds the key's secret: no cache may keep it
@require_POST
@login_required
def api_key_create(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    form = ApiKeyCreateForm(request.POST)
    if not form.is_valid():
        return _keys_page(request, membership, form, status=400)
    try:
        created = create_api_key(
            membership.project,
            name=form.cleaned_data["name"],
            scope=form.cleaned_data["scope"],
            expires_at=form.cleaned_data.get("expires_at"),
            actor=_actor(request),
        )
    except DomainError as error:
        form.add_error(None, error.message)
        return _keys_page(request, membership, form, status=_refusal_status(error))
    # Redirected, so that a reload cannot create a second key; the secret rides in the
    # server-side session to the next page, which pops it: shown once, then only the prefix.
    key, secret = created
    request.session[NEW_KEY_SESSION] = {
        "project": membership.project_id,
        "key": key.pk,
        "secret": secret,
    }
    return redirect("dashboard:api_keys", project_id)


@require_POST
@login_required
def api_key_revoke(request: HttpRequest, project_id: int, key_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    api_key = api_key_in(membership.project_id, key_id)
    revoke_api_key(api_key, actor=_actor(request))
    messages.success(request, f"Key {api_key.prefix} revoked: requests with it now answer 401.")
    return redirect("dashboard:api_keys", project_id)


# --- Audit log --------------------------------------------------------------------------------


@require_GET
@login_required
@vary_on_headers("HX-Request")
def audit_log(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id, Role.ADMIN)
    project = membership.project
    form = AuditFilterForm(request.GET)
    partial = htmx_partial_for(request, "audit-results")
    template = AUDIT_PAGE + (f"#{partial}" if partial else "")
    context = _console_context(request, membership, "audit")
    context.update(
        {"form": form, "known_actions": KNOWN_ACTIONS, "known_target_types": KNOWN_TARGET_TYPES}
    )
    if not form.is_valid():
        context["errors"] = form_errors(form)
        return render(request, template, context, status=400)
    cursor = form.cleaned_data.get("cursor")
    rendered_at = render_started()  # before the read: what the page's socket catches up from
    entries, next_id = page_audit(
        filter_audit(project, form.to_filters()), before_id=cursor, limit=AUDIT_PER_PAGE
    )
    params = request.GET.copy()
    params.pop("cursor", None)
    first_query = params.urlencode()
    if next_id:
        params["cursor"] = str(next_id)
    context.update(
        {
            "entries": audit_rows(project, entries),
            "first_query": first_query,
            "next_query": params.urlencode() if next_id else "",
            "is_first_page": cursor is None,
            "is_filtered": form.is_filtered,
            "ws_url": f"/ws/projects/{project.pk}/audit/?"
            + live_query(request.GET, rendered_at, entries),
        }
    )
    return render(request, template, context)


# --- New project ------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@login_required
def new_project(request: HttpRequest) -> HttpResponse:
    """Any signed-in person may start a project; they become its first admin."""
    form = NewProjectForm(request.POST if request.method == "POST" else None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                project = create_project(form.cleaned_data["name"], creator=request.user)  # type: ignore[arg-type]
            except DomainError as error:
                form.add_error(None, error.message)
                status = _refusal_status(error)
            else:
                messages.success(request, f"Project {project.name} created; you are its admin.")
                return redirect("dashboard:overview", project.pk)
        else:
            status = 400
    context = {
        "form": form,
        "errors": form_errors(form) if form.is_bound else [],
        "user_projects": user_projects(request.user),  # type: ignore[arg-type]
    }
    return render(request, NEW_PROJECT_PAGE, context, status=status)
