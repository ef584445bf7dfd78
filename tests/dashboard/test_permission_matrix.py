"""Every dashboard URL × every persona: the answer, and that a refused request changed nothing.

The URLs are read from the resolver (the "dashboard" and "tasks" namespaces), not listed by
hand: a new URL without a row in MATRIX fails here until someone decides who may use it.

Personas (tests/dashboard/conftest.py): anonymous, viewer, operator, admin of the project, and
an outsider who is an admin of another project only. The rules:
  anonymous → redirect to sign in · outsider → 404 (as if nothing existed) ·
  viewer → allowed to read, 403 on operator actions · operator and admin → allowed ·
  the webhooks pages → admins only (403 for viewers and operators, reads included).
  below the row's role → 403, nothing changed · at or above it → allowed.
Console rows: settings (the project's name and its handoff SLA settings) and members are read
by every member, changed by admins; API keys, webhooks and the audit log are admin-only.
"""

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core import mail
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from core.actors import Actor
from core.models import (
    ApiKey,
    AuditEntry,
    Invitation,
    Membership,
    Project,
    Role,
    WebhookDelivery,
    WebhookEndpoint,
)
from core.services.invitations import invite_member
from core.services.webhooks import create_endpoint
from handoffs_app.models import Handoff, HandoffSettings
from handoffs_app.services.handoffs import claim_handoff, request_handoff_locked, take_over
from retention_app.models import ErasureRequest, LegalHold, RetentionPolicy, RetentionRun
from retention_app.services.holds import place_hold
from sessions_app.models import Event, Session, Snapshot
from sessions_app.services.lifecycle import pause_session
from tasks_app.models import Step, Task, TaskHistory
from tests.factories import make_api_key, make_artifact, make_session, make_task, make_user

NAMESPACES = ("dashboard", "tasks")
PERSONAS = ("anonymous", "viewer", "operator", "admin", "outsider")
HTMX = {"HX-Request": "true"}


def dashboard_urls() -> dict[str, list[str]]:
    """Every named URL of the dashboard's namespaces → the names of its keyword arguments."""
    found: dict[str, list[str]] = {}

    def walk(namespace: str, patterns: list[Any]) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(namespace, pattern.url_patterns)
                continue
            assert isinstance(pattern, URLPattern)
            assert pattern.name, f"an unnamed URL in {namespace}: {pattern.pattern}"
            found[f"{namespace}:{pattern.name}"] = sorted(pattern.pattern.converters)

    resolver = get_resolver()
    for namespace in NAMESPACES:
        _, sub = resolver.namespace_dict[namespace]
        walk(namespace, sub.url_patterns)
    return found


URLS = dashboard_urls()


# --- The world each case starts from --------------------------------------------------------


@dataclass
class World:
    team: Any
    session: Session
    task: Task
    api_key: ApiKey
    stranger: Any  # a user in no project (to be added as a member)
    handoff: Any = None

    @property
    def viewer_membership(self) -> Membership:
        return Membership.objects.get(project=self.team.project, user=self.team.viewer)

    def kwargs(self, name: str) -> dict[str, Any]:
        values = {
            "project_id": self.team.project.pk,
            "session_id": self.session.pk,
            "name": "matrix.txt",  # the artifact artifact_saved makes
            "task_id": self.task.pk,
            "handoff_id": self.handoff.pk if self.handoff else None,
            "member_id": self.viewer_membership.pk,
            "key_id": self.api_key.pk,
        }
        endpoint = WebhookEndpoint.objects.filter(project=self.team.project).first()
        delivery = WebhookDelivery.objects.filter(project=self.team.project).first()
        if endpoint is not None:
            values["endpoint_id"] = endpoint.pk
        hold = LegalHold.objects.filter(project=self.team.project).first()
        if hold is not None:
            values["hold_id"] = hold.pk
        if delivery is not None:
            values["delivery_id"] = delivery.pk
        erasure = ErasureRequest.objects.filter(project=self.team.project).first()
        if erasure is not None:
            values["erasure_id"] = erasure.pk
        invitation = Invitation.objects.filter(project=self.team.project).first()
        if invitation is not None:
            values["invitation_id"] = invitation.public_id
        missing = [k for k in URLS[name] if k not in values]
        assert not missing, f"{name}: teach World.kwargs how to fill {missing}"
        return {k: values[k] for k in URLS[name]}


def snapshot() -> dict[str, Any]:
    """Everything a dashboard request could change."""
    return {
        "sessions": sorted(
            Session.objects.values_list(
                "pk", "status", "head_seq", "title", "parent_id", "fork_seq", "updated_at"
            )
        ),
        "events": Event.objects.count(),
        "snapshots": Snapshot.objects.count(),
        "audit": list(AuditEntry.objects.order_by("pk").values_list("action", "target_id")),
        "memberships": sorted(Membership.objects.values_list("user_id", "project_id", "role")),
        "tasks": sorted(Task.objects.values_list("pk", "state", "version", "updated_at")),
        "steps": sorted(Step.objects.values_list("pk", "status", "attempts")),
        "task_history": TaskHistory.objects.count(),
        "handoffs": sorted(
            Handoff.objects.values_list("pk", "status", "lease_holder_id", "lease_expires_at")
        ),
        "handoff_settings": sorted(
            HandoffSettings.objects.values_list("project_id", "lease_seconds", "updated_at")
        ),
        "webhooks": sorted(WebhookEndpoint.objects.values_list("pk", "url", "active")),
        "deliveries": sorted(WebhookDelivery.objects.values_list("pk", "status", "attempts")),
        "projects": sorted(Project.objects.values_list("pk", "name")),
        "api_keys": sorted(ApiKey.objects.values_list("pk", "revoked_at", "scope", "expires_at")),
        "retention_policies": sorted(RetentionPolicy.objects.values_list("pk", "compact_after")),
        "holds": sorted(LegalHold.objects.values_list("pk", "released_at")),
        "runs": RetentionRun.objects.count(),
        "erasures": ErasureRequest.objects.count(),
        "invitations": sorted(Invitation.objects.values_list("public_id", "sent_at")),
        "mails": len(mail.outbox),
    }


def drain(response) -> bytes:
    """A streamed body, read to the end (the export streams from an async iterator)."""
    if not response.streaming:
        return response.content

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(collect)() if response.is_async else b"".join(response.streaming_content)


# --- What "allowed" looks like, per URL --------------------------------------------------------


def page(response, world: World, before: dict[str, Any]) -> None:
    """A read: 200, and nothing changed."""
    assert response.status_code == 200, response.status_code
    assert snapshot() == before


def redirect_to(url_of: Callable[[World], str]) -> Callable[..., None]:
    def check(response, world: World, before: dict[str, Any]) -> None:
        assert response.status_code == 302, response.status_code
        assert response["Location"] == url_of(world)
        assert snapshot() == before

    return check


def overview_of(project_attr: str) -> Callable[[World], str]:
    return lambda w: reverse("dashboard:overview", args=[getattr(w.team, project_attr).pk])


def exported(response, world: World, before: dict[str, Any]) -> None:
    assert response.status_code == 200, response.status_code
    assert response["Content-Type"] == "application/x-ndjson"
    assert drain(response).count(b"\n") == 1 + world.session.head_seq  # the header, the events
    after = snapshot()
    assert after["audit"] == [*before["audit"], ("session.export", str(world.session.pk))]
    assert {**after, "audit": None} == {**before, "audit": None}  # only the audit entry


def moved_to(status: str) -> Callable[..., None]:
    def check(response, world: World, before: dict[str, Any]) -> None:
        assert response.status_code == 302, response.status_code
        assert response["Location"] == reverse("dashboard:session_detail", args=[world.session.pk])
        session = Session.objects.get(pk=world.session.pk)
        assert session.status == status
        assert session.head_seq == world.session.head_seq + 1  # the lifecycle event

    return check


def forked(response, world: World, before: dict[str, Any]) -> None:
    assert response.status_code == 302, response.status_code
    fork = Session.objects.get(parent=world.session)
    assert fork.fork_seq == 3
    assert response["Location"] == reverse("dashboard:session_detail", args=[fork.pk])
    assert ("session.fork", str(fork.pk)) in snapshot()["audit"]


def deleted(response, world: World, before: dict[str, Any]) -> None:
    assert response.status_code == 302, response.status_code
    assert response["Location"] == reverse("dashboard:session_list", args=[world.team.project.pk])
    assert not Session.objects.filter(pk=world.session.pk).exists()
    assert ("session.delete", str(world.session.pk)) in snapshot()["audit"]


def console_page(response, world: World, before: dict[str, Any]) -> None:
    page(response, world, before)
    assert b"console-nav" in response.content


def changed(url_of: Callable[[World], str], effect: Callable[[World], bool], action: str):
    """A console change: a redirect to its page, the effect in the database, one audit row."""

    def check(response, world: World, before: dict[str, Any]) -> None:
        assert response.status_code == 302, response.status_code
        assert response["Location"] == url_of(world)
        assert effect(world)
        assert AuditEntry.objects.filter(project=world.team.project, action=action).count() == 1

    return check


def console(name: str) -> Callable[[World], str]:
    return lambda w: reverse(name, args=[w.team.project.pk])


def key_created(response, world: World, before: dict[str, Any]) -> None:
    # Redirected to the keys page (which shows the secret once, from the session).
    assert response.status_code == 302, response.status_code
    assert response["Location"] == console("dashboard:api_keys")(world)
    new = ApiKey.objects.exclude(pk=world.api_key.pk).get(project=world.team.project)
    assert new.name == "matrix key"
    assert response["Cache-Control"].startswith("max-age=0")


@dataclass(frozen=True)
class Row:
    method: str  # "get" or "post"
    needs: str  # the least role that may use it: "viewer" (a read) or "operator" (an action)
    allowed: Callable[..., None]
    data: dict[str, Any] | Callable[[World], dict[str, Any]] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    prepare: Callable[[World], None] | None = None
    # Only for URLs outside a project (home): what an outsider gets instead of a 404.
    outsider: Callable[..., None] | None = None
    # Handoff actions of the lease holder: claimed first by the persona (an operator or
    # admin), or by the project's operator (for the others, who are refused anyway).
    prepare_holder: Callable[[World, Any], None] | None = None


def artifact_saved(world: World) -> None:
    make_artifact(world.session, "matrix.txt", b"matrix bytes")


def downloaded(response, world: World, before: dict[str, Any]) -> None:
    assert response.status_code == 200, response.status_code
    assert response["Content-Disposition"] == 'attachment; filename="matrix.txt"'
    assert drain(response) == b"matrix bytes"
    assert snapshot() == before


def invited(world: World) -> None:
    invite_member(
        world.team.project,
        "invitee@example.com",
        role=Role.VIEWER,
        actor=Actor.for_user(world.team.admin),
        base_url="http://testserver/",
    )


def members_invitations(world: World) -> str:
    return f"{reverse('dashboard:members', args=[world.team.project.pk])}#invitations"


def paused(world: World) -> None:
    pause_session(world.session, actor=Actor.system("tests"), reason="so it can be resumed")
    world.session.refresh_from_db()


ALL_ANSWERS = {
    "action_request": {"action": "refund", "args": {"order": "A-1", "amount": "12.00"}},
    "config": {
        "allow_accept": True,
        "allow_edit": True,
        "allow_respond": True,
        "allow_ignore": True,
    },
    "description": "matrix",
}


def open_handoff(session: Session, kind: str = "approval", payload: Any = None) -> Handoff:
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        return request_handoff_locked(
            locked,
            kind=kind,
            reason="matrix",
            payload=ALL_ANSWERS if payload is None else payload,
            priority="normal",
            due_in=None,
            idempotency_key=None,
            actor=Actor.system("tests-agent"),
        )


def claimed(world: World, user: Any) -> None:
    claim_handoff(world.handoff, user=user)


def taken_over(world: World, user: Any) -> None:
    claim_handoff(world.handoff, user=user)
    take_over(world.handoff, user=user)


def budget_claimed(world: World, user: Any) -> None:
    session = make_session(world.team.project, title="over budget")
    world.handoff = open_handoff(session, "budget", {"usage": {"tokens": 10}})
    claim_handoff(world.handoff, user=user)


def handoff_now(world: World) -> Handoff:
    return Handoff.objects.get(pk=world.handoff.pk)


def handoff_became(check: Callable[[Handoff, World], bool], redirect: bool = True):
    def allowed(response, world: World, before: dict[str, Any]) -> None:
        assert response.status_code == 302, response.status_code
        assert response["Location"] == reverse("dashboard:handoff_detail", args=[world.handoff.pk])
        assert check(handoff_now(world), world), handoff_now(world).status

    return allowed


def appended(kind: str):
    def check(h: Handoff, world: World) -> bool:
        return Event.objects.filter(session_id=h.session_id, kind=kind).exists()

    return check


def with_webhook(world: World) -> None:
    """An endpoint (nobody listens at its port: a redelivery fails fast) and one delivery."""
    from tests.servers import free_port

    create_endpoint(
        world.team.project,
        url=f"http://127.0.0.1:{free_port()}/hooks",
        events=["session.paused"],
        actor=Actor.system("tests"),
    )
    paused(world)


def with_hold(world: World) -> None:
    place_hold(world.team.project, session=world.session, reason="m", actor=Actor.system("t"))


def ran_now(response, world: World, before: dict[str, Any]) -> None:
    assert response.status_code == 302, response.status_code
    assert response["Location"] == reverse("dashboard:retention", args=[world.team.project.pk])
    assert RetentionRun.objects.filter(project=world.team.project).count() == 2


def with_erasure(world: World) -> None:
    ErasureRequest.objects.create(
        project=world.team.project, selectors={"external_id": "nobody"}, requested_by="t"
    )


def erasure_requested(response, world: World, before: dict[str, Any]) -> None:
    assert response.status_code == 302, response.status_code
    assert response["Location"] == reverse("dashboard:erasure", args=[world.team.project.pk])
    assert ErasureRequest.objects.filter(project=world.team.project).count() == 1


def receipt_downloaded(response, world: World, before: dict[str, Any]) -> None:
    assert response.status_code == 200, response.status_code
    assert b'"selectors": {"external_id": "nobody"}' in drain(response)
    assert snapshot() == before


def webhooks_page(world: World) -> str:
    return reverse("dashboard:webhooks", args=[world.team.project.pk])


def endpoint_created(response, world: World, before: dict[str, Any]) -> None:
    assert response.status_code == 201, response.status_code
    endpoint = WebhookEndpoint.objects.get(url="https://hooks.example.com/new")
    assert endpoint.secret.encode() in response.content
    assert ("webhook.created", str(endpoint.pk)) in snapshot()["audit"]


def endpoint_changed(active: bool | None) -> Callable[..., None]:
    """Toggled to `active`, or deleted (None); back to the webhooks page."""

    def check(response, world: World, before: dict[str, Any]) -> None:
        assert response.status_code == 302, response.status_code
        assert response["Location"] == webhooks_page(world)
        endpoints = WebhookEndpoint.objects.filter(project=world.team.project)
        if active is None:
            assert not endpoints.exists()
        else:
            assert [e.active for e in endpoints] == [active]

    return check


def status_is(status: str, answer: str | None = None):
    def check(h: Handoff, world: World) -> bool:
        return h.status == status and (answer is None or h.answer["type"] == answer)

    return check


def redelivered(response, world: World, before: dict[str, Any]) -> None:
    assert response.status_code == 302, response.status_code
    assert response["Location"] == webhooks_page(world)
    delivery = WebhookDelivery.objects.get(project=world.team.project)
    assert delivery.attempts == 1
    assert delivery.attempt_log.get().redelivery


MATRIX: dict[str, Row] = {
    # Where a signed-in user lands: the (remembered or first) project they are a member of.
    "dashboard:home": Row(
        "get",
        "viewer",
        redirect_to(overview_of("project")),
        outsider=redirect_to(overview_of("other_project")),
    ),
    "dashboard:switch_project": Row(
        "get",
        "viewer",
        redirect_to(overview_of("project")),
        data=lambda w: {"project": w.team.project.pk},
    ),
    "dashboard:overview": Row("get", "viewer", page),
    "dashboard:session_list": Row("get", "viewer", page),
    "dashboard:session_detail": Row("get", "viewer", page),
    # Fragments the session page fetches with htmx (without htmx they redirect to the page).
    "dashboard:session_events": Row("get", "viewer", page, data={"before_seq": 4}, headers=HTMX),
    "dashboard:session_inspector": Row("get", "viewer", page, data={"at_seq": 2}, headers=HTMX),
    "dashboard:session_export": Row("get", "viewer", exported),
    "dashboard:session_artifact": Row("get", "viewer", downloaded, prepare=artifact_saved),
    "dashboard:session_pause": Row(
        "post", "operator", moved_to("paused"), data={"reason": "matrix"}
    ),
    "dashboard:session_resume": Row("post", "operator", moved_to("resumed"), prepare=paused),
    "dashboard:session_close": Row("post", "operator", moved_to("closed")),
    "dashboard:session_fork": Row("post", "operator", forked, data={"at_seq": 3}),
    "dashboard:session_delete": Row("post", "admin", deleted),
    # Handoffs: the queue and the workspace are reads; claiming is an operator's, every
    # other action the lease holder's (an operator), reassigning an admin's.
    "dashboard:handoff_queue": Row("get", "viewer", page),
    "dashboard:handoff_detail": Row("get", "viewer", page),
    # The next waiting handoff (the keyboard's "n"): operators only, as a viewer acts on none.
    # Nobody waits in this world: back to the queue.
    "dashboard:handoff_next": Row(
        "get",
        "operator",
        redirect_to(lambda w: reverse("dashboard:handoff_queue", args=[w.team.project.pk])),
    ),
    "dashboard:handoff_messages": Row("get", "viewer", page, data={"before_seq": 4}, headers=HTMX),
    "dashboard:handoff_claim": Row(
        "post", "operator", handoff_became(lambda h, w: h.status == "claimed" and h.lease_holder_id)
    ),
    "dashboard:handoff_release": Row(
        "post", "operator", handoff_became(status_is("open")), prepare_holder=claimed
    ),
    "dashboard:handoff_renew": Row(
        "post", "operator", handoff_became(status_is("claimed")), prepare_holder=claimed
    ),
    "dashboard:handoff_reassign": Row(
        "post",
        "admin",
        handoff_became(lambda h, w: h.lease_holder_id == w.team.operator.pk),
        data=lambda w: {"to_user": w.team.operator.pk},
        prepare_holder=claimed,
    ),
    "dashboard:handoff_respond": Row(
        "post",
        "operator",
        handoff_became(status_is("answered", "respond")),
        data={"text": "yes, go"},
        prepare_holder=claimed,
    ),
    "dashboard:handoff_accept": Row(
        "post", "operator", handoff_became(status_is("answered", "accept")), prepare_holder=claimed
    ),
    "dashboard:handoff_reject": Row(
        "post", "operator", handoff_became(status_is("answered", "reject")), prepare_holder=claimed
    ),
    "dashboard:handoff_ignore": Row(
        "post", "operator", handoff_became(status_is("ignored", "ignore")), prepare_holder=claimed
    ),
    "dashboard:handoff_edit": Row(
        "post",
        "operator",
        handoff_became(status_is("answered", "edit")),
        data={"args": '{"order": "A-1", "amount": "5.00"}', "confirm": "on"},
        prepare_holder=claimed,
    ),
    "dashboard:handoff_budget": Row(
        "post",
        "operator",
        handoff_became(status_is("answered", "budget")),
        data={"max_tokens": "5000"},
        prepare_holder=budget_claimed,
    ),
    "dashboard:handoff_state": Row(
        "post",
        "operator",
        handoff_became(appended("state")),
        data={"patch": '{"stage": "by hand"}', "confirm": "on"},
        prepare_holder=claimed,
    ),
    "dashboard:handoff_facts": Row(
        "post",
        "operator",
        handoff_became(
            lambda h, w: Event.objects.filter(
                session_id=h.session_id, kind="fact", content__key="checked"
            ).exists()
        ),
        data={"key": "checked", "value": "true"},
        prepare_holder=claimed,
    ),
    "dashboard:handoff_take_over": Row(
        "post", "operator", handoff_became(status_is("taken_over")), prepare_holder=claimed
    ),
    "dashboard:handoff_message": Row(
        "post",
        "operator",
        handoff_became(
            lambda h, w: Event.objects.filter(session_id=h.session_id, role="human").exists()
        ),
        data={"text": "a person here"},
        prepare_holder=taken_over,
    ),
    "dashboard:handoff_hand_back": Row(
        "post", "operator", handoff_became(status_is("handed_back")), prepare_holder=claimed
    ),
    "dashboard:handoff_close": Row(
        "post", "operator", handoff_became(status_is("closed")), prepare_holder=claimed
    ),
    # The waiting handoffs the browser notifications compare (static/js/notify.js).
    "dashboard:handoff_waiting": Row("get", "viewer", page),
    # The handoff digest: admins only, to read as well (its addresses and chat URL are
    # configuration, like webhooks); the GET is in tests/dashboard/test_handoff_digest.py.
    "dashboard:handoff_digest": Row(
        "post",
        "admin",
        changed(
            console("dashboard:handoff_digest"),
            lambda w: (
                HandoffSettings.objects.get(project=w.team.project).digest_emails
                == ["ops@example.com"]
            ),
            "handoff.digest",
        ),
        data={"emails": "ops@example.com", "chat_url": "", "interval": "3600"},
    ),
    # Webhooks: admins only, to read as well (endpoint URLs and payloads are configuration).
    "dashboard:webhooks": Row("get", "admin", page, prepare=with_webhook),
    "dashboard:webhook_create": Row(
        "post",
        "admin",
        endpoint_created,
        data={"url": "https://hooks.example.com/new", "events": ["session.paused"]},
    ),
    "dashboard:webhook_toggle": Row(
        "post", "admin", endpoint_changed(False), data={"active": "false"}, prepare=with_webhook
    ),
    "dashboard:webhook_delete": Row("post", "admin", endpoint_changed(None), prepare=with_webhook),
    "dashboard:webhook_redeliver": Row("post", "admin", redelivered, prepare=with_webhook),
    "tasks:list": Row("get", "viewer", page),
    # Retention: every member reads the page; admins save the policy (or preview it), run the
    # jobs now, place and lift legal holds.
    "dashboard:retention": Row("get", "viewer", page, prepare=with_hold),
    "dashboard:retention_policy": Row(
        "post",
        "admin",
        changed(
            console("dashboard:retention"),
            lambda w: RetentionPolicy.objects.filter(project=w.team.project).exists(),
            "retention.policy",
        ),
        data={
            "compact_after": "30",
            "archive_closed_after": "7",
            "action": "save",
            # The agent overrides' formset, with no override.
            "agents-TOTAL_FORMS": "0",
            "agents-INITIAL_FORMS": "0",
        },
    ),
    "dashboard:retention_run": Row("post", "admin", ran_now),
    # Erasure of a data subject: admins only, reads included (the receipts name the subject).
    "dashboard:erasure": Row("get", "admin", page, prepare=with_erasure),
    "dashboard:erasure_preview": Row(
        "post", "admin", page, data={"metadata_key": "user", "metadata_value": "u-1"}
    ),
    "dashboard:erasure_confirm": Row(
        "post", "admin", erasure_requested, data={"external_id": "nobody", "confirm": "yes"}
    ),
    "dashboard:erasure_receipt": Row("get", "admin", receipt_downloaded, prepare=with_erasure),
    "dashboard:retention_hold": Row(
        "post",
        "admin",
        changed(
            console("dashboard:retention"),
            lambda w: LegalHold.objects.filter(project=w.team.project, scope="project").exists(),
            "retention.hold",
        ),
        data={"target": "project", "reason": "matrix"},
    ),
    "dashboard:retention_lift": Row(
        "post",
        "admin",
        changed(
            console("dashboard:retention"),
            lambda w: not LegalHold.objects.filter(released_at__isnull=True).exists(),
            "retention.release",
        ),
        prepare=with_hold,
    ),
    # Any signed-in person may start a project: the form is everyone's.
    "dashboard:new_project": Row("get", "viewer", page, outsider=page),
    # The console.
    "dashboard:project_settings": Row("get", "viewer", console_page),
    "dashboard:project_rename": Row(
        "post",
        "admin",
        changed(
            console("dashboard:project_settings"),
            lambda w: Project.objects.get(pk=w.team.project.pk).name == "renamed by matrix",
            "project.rename",
        ),
        data={"name": "renamed by matrix"},
    ),
    "dashboard:project_handoff_settings": Row(
        "post",
        "admin",
        changed(
            lambda w: (
                reverse("dashboard:project_settings", args=[w.team.project.pk])
                + "#handoff-settings"
            ),
            lambda w: HandoffSettings.objects.get(project=w.team.project).lease_seconds == 600,
            "handoff.settings",
        ),
        data={
            "question_due_minutes": 30,
            "approval_due_minutes": 30,
            "takeover_due_minutes": 15,
            "budget_due_minutes": 60,
            "expire_after_overdue_minutes": 24 * 60,
            "lease_minutes": 10,
        },
    ),
    "dashboard:members": Row("get", "viewer", console_page),
    "dashboard:member_add": Row(
        "post",
        "admin",
        changed(
            console("dashboard:members"),
            lambda w: Membership.objects.filter(
                project=w.team.project, user=w.stranger, role=Role.OPERATOR
            ).exists(),
            "member.add",
        ),
        data=lambda w: {"user": w.stranger.username, "role": "operator"},
    ),
    "dashboard:invitation_resend": Row(
        "post",
        "admin",
        changed(members_invitations, lambda w: len(mail.outbox) == 2, "invitation.resend"),
        prepare=invited,
    ),
    "dashboard:invitation_revoke": Row(
        "post",
        "admin",
        changed(
            members_invitations, lambda w: not Invitation.objects.exists(), "invitation.revoke"
        ),
        prepare=invited,
    ),
    "dashboard:member_role": Row(
        "post",
        "admin",
        changed(
            console("dashboard:members"),
            lambda w: w.viewer_membership.role == Role.OPERATOR,
            "member.role",
        ),
        data={"role": "operator"},
    ),
    "dashboard:member_remove": Row(
        "post",
        "admin",
        changed(
            console("dashboard:members"),
            lambda w: (
                not Membership.objects.filter(project=w.team.project, user=w.team.viewer).exists()
            ),
            "member.remove",
        ),
    ),
    "dashboard:api_keys": Row("get", "admin", console_page),
    "dashboard:api_key_create": Row(
        "post", "admin", key_created, data={"name": "matrix key", "scope": "agent"}
    ),
    "dashboard:api_key_revoke": Row(
        "post",
        "admin",
        changed(
            console("dashboard:api_keys"),
            lambda w: ApiKey.objects.get(pk=w.api_key.pk).revoked_at is not None,
            "api_key.revoke",
        ),
    ),
    "dashboard:audit_log": Row("get", "admin", console_page),
    "tasks:detail": Row("get", "viewer", page),
}

RANK = {"viewer": 0, "operator": 1, "admin": 2}


def client_for(world: World, persona: str) -> Client:
    return Client() if persona == "anonymous" else world.team.client(persona)


def test_every_dashboard_url_has_a_row_and_every_row_a_url():
    assert "dashboard:session_detail" in URLS and "tasks:detail" in URLS  # the walk works
    assert sorted(set(URLS) - set(MATRIX)) == [], "URLs without a row in MATRIX"
    assert sorted(set(MATRIX) - set(URLS)) == [], "rows in MATRIX for URLs that are gone"


def cases() -> list[Any]:
    """Every URL × persona; the export reads through a connection of its own, so its cases
    commit their rows (transactional) for it to see them."""
    return [
        pytest.param(name, persona, marks=pytest.mark.django_db(transaction=True))
        if name == "dashboard:session_export"
        else (name, persona)
        for name, persona in itertools.product(sorted(URLS), PERSONAS)
    ]


@pytest.mark.parametrize(("name", "persona"), cases())
def test_the_matrix(team, session, name, persona):
    assert name in MATRIX, f"{name} has no row in MATRIX: decide who may use it"
    row = MATRIX[name]
    world = World(
        team=team,
        session=session,
        task=make_task(team.project),
        api_key=make_api_key(team.project)[0],
        stranger=make_user(),
    )
    if "handoff_id" in URLS[name] or name == "dashboard:handoff_queue":
        world.handoff = open_handoff(make_session(team.project, title="asks for a person"))
    if row.prepare:
        row.prepare(world)
    if row.prepare_holder:
        acting = persona if persona in ("operator", "admin") else "operator"
        row.prepare_holder(world, getattr(team, acting))
    url = reverse(name, kwargs=world.kwargs(name))
    data = row.data(world) if callable(row.data) else row.data
    before = snapshot()
    client = client_for(world, persona)

    response = getattr(client, row.method)(url, data, headers=row.headers)

    if persona == "anonymous":
        assert response.status_code == 302, response.status_code
        full_path = url + (
            f"?{response.request['QUERY_STRING']}"
            if row.method == "get" and response.request["QUERY_STRING"]
            else ""
        )
        assert response["Location"] == f"{reverse(settings.LOGIN_URL)}?next={quote(full_path)}"
        assert snapshot() == before
    elif persona == "outsider" and row.outsider is not None:
        row.outsider(response, world, before)
    elif persona == "outsider":
        assert response.status_code == 404, response.status_code
        assert b"Not found" in drain(response)
        assert snapshot() == before
    elif RANK[persona] < RANK[row.needs]:
        assert response.status_code == 403, response.status_code
        assert b"Not allowed" in drain(response)
        assert snapshot() == before
    else:
        row.allowed(response, world, before)
