"""The Django admin: every model of the apps registered (Event excepted: the admin refuses
composite primary keys), each list with filters and search answering, read-only models
unwritable, an API key's hash shown nowhere, and changes with rules made through the services."""

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from core.actors import Actor
from core.models import (
    ApiKey,
    AuditEntry,
    Invitation,
    LiveNotice,
    Membership,
    Project,
    Role,
    WebhookDelivery,
    WebhookEndpoint,
)
from core.services.invitations import invite_member
from core.services.webhooks import create_endpoint, redeliver
from handoffs_app.models import HandoffViewer
from handoffs_app.services.sla import update_handoff_settings
from sessions_app.models import Blob, Event, Session, Snapshot
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.state import take_snapshot
from tasks_app.models import TaskHistory
from tasks_app.services.signals import deliver_signal
from tests.factories import (
    make_api_key,
    make_artifact,
    make_member,
    make_project,
    make_session,
    make_task,
)
from tests.handoffs.helpers import ask
from tests.servers import free_port

APPS = ("core", "sessions_app", "tasks_app", "handoffs_app", "retention_app")
NOT_REGISTERED = {
    Event,  # composite primary key (session_id, seq): see sessions_app/admin.py
    Blob,  # composite primary key (session_id, sha256), bytes nobody reads in a form
    LiveNotice,  # a live notice's body for a few minutes (core.notify_layer): nothing to manage
    HandoffViewer,  # an open workspace page, for seconds (handoffs_app.presence): nothing either
}
READ_ONLY = {
    "auditentry",
    "invitation",
    "outboxmessage",
    "session",
    "snapshot",
    "artifact",
    "task",
    "step",
    "tasksession",
    "taskhistory",
    "tasksignal",
    "workflowdefinition",
    "handoff",
    "handoffsettings",
    "webhookdelivery",
    "webhookattempt",
    "retentionpolicy",
    "legalhold",
    "retentionrun",
    "compaction",
    "sessiontombstone",
    "erasurerequest",
    "erasuretarget",
    "erasedobject",
}


@pytest.fixture
def staff(db) -> Client:
    root = get_user_model().objects.create_superuser("staff", "staff@example.com", "pw")
    client = Client()
    client.force_login(root)
    return client


@pytest.fixture
def data(db):
    project = make_project("Acme")
    admin_user = make_member(project, Role.ADMIN, "alice")
    make_member(project, Role.VIEWER, "victor")
    key, raw = make_api_key(project, name="bot")
    session = make_session(project, title="Refund")
    append_events(
        session,
        [EventDraft(kind="message", role="user", content={"text": "hello there"})],
        actor=Actor.system("t"),
    )
    take_snapshot(session, 1, reason="manual")
    make_artifact(make_session(project, title="Files"), "report.txt", b"admin")
    task = make_task(project, session_ids=[str(session.pk)])
    deliver_signal(task, "reviewer_answered", actor=Actor.system("t"), payload={"ok": True})
    # Nobody listens at the endpoint's port: the redelivery fails fast, and is logged.
    endpoint, secret = create_endpoint(
        project,
        url=f"http://127.0.0.1:{free_port()}/hooks",
        events=["handoff.created"],
        actor=Actor.system("t"),
    )
    handoff = ask(make_session(project, title="Asks"), kind="question")
    redeliver(WebhookDelivery.objects.get(endpoint=endpoint), actor=Actor.system("t"))
    update_handoff_settings(project.pk, user=admin_user, lease_seconds=600)
    invitation = invite_member(
        project, "nia@example.com", role=Role.OPERATOR, actor=Actor.system("t"), base_url=""
    )
    _retention_rows()
    return {
        "project": project,
        "admin": admin_user,
        "key": key,
        "raw": raw,
        "session": session,
        "endpoint": endpoint,
        "secret": secret,
        "handoff": handoff,
        "invitation": invitation,
    }


def _retention_rows() -> None:
    """A policy, a hold, runs, a compaction and a tombstone (in a project of their own)."""
    from datetime import timedelta

    import time_machine
    from django.utils import timezone

    from retention_app.services.holds import place_hold
    from retention_app.services.jobs import run_job
    from retention_app.services.policies import save_policy
    from sessions_app.services.lifecycle import archive_session, close_session

    system = Actor.system("t")
    project = make_project("Acme retention")
    fields = dict.fromkeys(("close_idle_after", "close_paused_after", "archive_closed_after"), None)
    policy = {
        **fields,
        "compact_after": 60,
        "delete_after": 60,
        "outcome_compact_after": None,
        "outcome_delete_after": None,
        "keep_outcomes": [],
        "keep_tags": [],
    }
    save_policy(project, policy, actor=system)
    held = make_session(project, title="held")
    place_hold(project, session=held, reason="Acme litigation", actor=system)
    kept = make_session(project, title="compacted")
    append_events(kept, [EventDraft(kind="note", content={})], actor=system)
    close_session(kept, actor=system)
    gone = make_session(project, title="gone")
    append_events(gone, [EventDraft(kind="note", content={})], actor=system)
    close_session(gone, actor=system)
    archive_session(gone, actor=system)
    with time_machine.travel(timezone.now() + timedelta(days=1)):
        run_job("compact_sessions", project_ids=[project.pk], trigger="t")
        run_job("enforce_retention", project_ids=[project.pk], trigger="t")
    # An erasure's receipt: the request, its target, the hashes of what went.
    from unittest import mock

    from retention_app.services.erasure import request_erasure, run_erasure

    subject = make_session(project, title="Acme subject", external_id="acme-subject")
    append_events(subject, [EventDraft(kind="note", content={})], actor=system)
    with mock.patch("retention_app.services.erasure.current_app.send_task"):
        erasure = request_erasure(project, {"external_id": "acme-subject"}, actor=system)
    run_erasure(erasure.pk)


def models():
    return [m for label in APPS for m in apps.get_app_config(label).get_models()]


def test_every_model_is_registered_but_event():
    missing = {m for m in models() if not admin.site.is_registered(m)}
    assert missing == NOT_REGISTERED


@pytest.mark.parametrize(
    "model", [m for m in models() if m not in NOT_REGISTERED], ids=lambda m: m._meta.label
)
def test_each_list_searches_filters_and_opens_a_row(staff, data, model):
    opts = model._meta
    changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    model_admin = admin.site._registry[model]
    assert model_admin.list_filter or model_admin.search_fields, opts.label
    response = staff.get(changelist)
    assert response.status_code == 200
    if model_admin.search_fields:
        assert staff.get(changelist, {"q": "Acme"}).status_code == 200
    obj = model.objects.first()
    assert obj is not None, f"no {opts.label} in the fixture"
    change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
    page = staff.get(change)
    assert page.status_code == 200
    if opts.model_name in READ_ONLY:
        assert not model_admin.has_add_permission(None)
        assert b'name="_save"' not in page.content
        add = reverse(f"admin:{opts.app_label}_{opts.model_name}_add")
        assert staff.get(add).status_code == 403


def test_an_api_keys_hash_is_shown_nowhere(staff, data):
    key = data["key"]
    stored = ApiKey.objects.get(pk=key.pk).hashed_secret
    changelist = staff.get(reverse("admin:core_apikey_changelist")).content.decode()
    change = staff.get(reverse("admin:core_apikey_change", args=[key.pk])).content.decode()
    for page in (changelist, change):
        assert stored not in page and "hashed_secret" not in page
        assert key.prefix in page
    assert staff.get(reverse("admin:core_apikey_add")).status_code == 403


def test_the_revoke_action_revokes_through_the_service(staff, data):
    key = data["key"]
    response = staff.post(
        reverse("admin:core_apikey_changelist"),
        {"action": "revoke_keys", "_selected_action": [key.pk]},
    )
    assert response.status_code == 302
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None
    entry = AuditEntry.objects.get(action="api_key.revoke")
    assert entry.actor == "user:staff"


def test_an_invitation_is_revoked_through_the_service(staff, data):
    invitation = data["invitation"]
    response = staff.post(
        reverse("admin:core_invitation_changelist"),
        {"action": "revoke_invitations", "_selected_action": [invitation.pk]},
    )
    assert response.status_code == 302
    assert not Invitation.objects.filter(pk=invitation.pk).exists()
    assert AuditEntry.objects.filter(action="invitation.revoke").exists()


def test_the_last_admin_cannot_be_demoted_or_deleted_in_the_admin(staff, data):
    alice = Membership.objects.get(user=data["admin"])
    url = reverse("admin:core_membership_change", args=[alice.pk])
    response = staff.post(url, {"role": "viewer"})
    assert response.status_code == 200  # the form again, with the error
    assert b"last admin of the project" in response.content
    assert Membership.objects.get(pk=alice.pk).role == Role.ADMIN
    delete = reverse("admin:core_membership_delete", args=[alice.pk])
    assert staff.post(delete, {"post": "yes"}).status_code == 403
    assert Membership.objects.filter(pk=alice.pk).exists()


def test_a_member_added_and_a_project_renamed_in_the_admin_are_audited(staff, data):
    project = data["project"]
    newcomer = get_user_model().objects.create_user("newcomer", password="pw")
    response = staff.post(
        reverse("admin:core_membership_add"),
        {"project": project.pk, "user": newcomer.pk, "role": "operator"},
    )
    assert response.status_code == 302, response.content
    assert Membership.objects.get(project=project, user=newcomer).role == Role.OPERATOR
    response = staff.post(
        reverse("admin:core_project_change", args=[project.pk]),
        {
            "name": "Acme Ltd",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
            "memberships-MIN_NUM_FORMS": "0",
            "memberships-MAX_NUM_FORMS": "1000",
        },
    )
    assert response.status_code == 302, response.content
    assert Project.objects.get(pk=project.pk).name == "Acme Ltd"
    actions = set(AuditEntry.objects.filter(project=project).values_list("action", flat=True))
    assert {"member.add", "project.rename"} <= actions


def test_a_sessions_page_lists_its_latest_events(staff, data):
    session = data["session"]
    page = staff.get(reverse("admin:sessions_app_session_change", args=[session.pk]))
    assert b"hello there" in page.content
    assert reverse("dashboard:session_detail", args=[session.pk]).encode() in page.content
    assert Session.objects.get(pk=session.pk).head_seq == 1
    assert Snapshot.objects.exists() and TaskHistory.objects.exists()


def test_a_webhook_secret_is_shown_nowhere(staff, data):
    endpoint = data["endpoint"]
    pages = [
        staff.get(reverse("admin:core_webhookendpoint_changelist")),
        staff.get(reverse("admin:core_webhookendpoint_change", args=[endpoint.pk])),
        staff.get(reverse("admin:core_webhookdelivery_changelist")),
        staff.get(reverse("admin:core_webhookendpoint_changelist"), {"q": "whsec_"}),
    ]
    for response in pages:
        text = response.content.decode()
        assert response.status_code == 200
        assert data["secret"] not in text and data["secret"][:10] not in text
        assert 'name="secret"' not in text
    assert endpoint.url in pages[0].content.decode()
    assert staff.get(reverse("admin:core_webhookendpoint_add")).status_code == 403


def test_an_endpoint_is_disabled_and_deleted_through_the_services(staff, data):
    endpoint = data["endpoint"]
    changelist = reverse("admin:core_webhookendpoint_changelist")
    response = staff.post(
        changelist, {"action": "disable_endpoints", "_selected_action": [endpoint.pk]}
    )
    assert response.status_code == 302
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).active is False
    assert AuditEntry.objects.get(action="webhook.disabled").actor == "user:staff"
    # The change form edits `active` only, through the same service.
    change = reverse("admin:core_webhookendpoint_change", args=[endpoint.pk])
    response = staff.post(change, {"active": "on", "url": "https://evil.example.com/"})
    assert response.status_code == 302, response.content
    reloaded = WebhookEndpoint.objects.get(pk=endpoint.pk)
    assert reloaded.active is True and reloaded.url == endpoint.url
    assert AuditEntry.objects.filter(action="webhook.enabled").count() == 1
    delete = reverse("admin:core_webhookendpoint_delete", args=[endpoint.pk])
    assert staff.post(delete, {"post": "yes"}).status_code == 302
    assert not WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()
    assert not WebhookDelivery.objects.filter(endpoint_id=endpoint.pk).exists()
    assert AuditEntry.objects.filter(action="webhook.deleted").count() == 1


def test_staff_redeliver_a_delivery_through_the_service(staff, data):
    delivery = WebhookDelivery.objects.get(endpoint=data["endpoint"])
    response = staff.post(
        reverse("admin:core_webhookdelivery_changelist"),
        {"action": "redeliver_deliveries", "_selected_action": [delivery.pk]},
        follow=True,
    )
    assert b"0 redelivered, 1 failed again" in response.content
    delivery.refresh_from_db()
    assert delivery.attempts == 2  # the fixture's redelivery, and this one
    assert list(delivery.attempt_log.values_list("redelivery", flat=True)) == [True, True]
    page = staff.get(reverse("admin:core_webhookdelivery_change", args=[delivery.pk]))
    error = delivery.attempt_log.last().error
    assert error and escape(error) in page.content.decode()  # the attempt log, inline


def test_a_handoffs_page_links_its_workspace_and_settings_point_at_the_console(staff, data):
    handoff = data["handoff"]
    page = staff.get(reverse("admin:handoffs_app_handoff_change", args=[handoff.pk]))
    assert reverse("dashboard:handoff_detail", args=[handoff.pk]).encode() in page.content
    found = staff.get(reverse("admin:handoffs_app_handoff_changelist"), {"q": "Asks"})
    assert str(handoff.pk).encode() in found.content
    settings_row = data["project"].handoff_settings
    page = staff.get(reverse("admin:handoffs_app_handoffsettings_change", args=[settings_row.pk]))
    assert reverse("dashboard:project_settings", args=[data["project"].pk]).encode() in (
        page.content
    )


def test_the_admin_index_spells_every_model_name(staff):
    """Django's default plural appends an s: "Handoff settingss". Each is named by hand."""
    page = staff.get(reverse("admin:index")).content.decode()
    assert "Handoff settings" in page
    assert "settingss" not in page.lower()
