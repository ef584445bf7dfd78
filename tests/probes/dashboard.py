"""The dashboard as the probes see it: its URLs (walked from the URLconf), the least role of
each (a table written from DESIGN.md's roles), valid bodies for its forms, and a project's
objects for the ids in its URLs."""

from typing import Any

from asgiref.sync import async_to_sync
from django.urls import URLPattern, URLResolver, get_resolver

from core.actors import Actor
from core.models import Membership, Role, WebhookDelivery, WebhookEndpoint
from core.services.invitations import invite_member
from core.services.webhooks import create_endpoint
from handoffs_app.services.handoffs import request_handoff
from retention_app.models import LegalHold
from retention_app.services.holds import place_hold
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import pause_session
from tests.factories import (
    make_api_key,
    make_artifact,
    make_erasure,
    make_member,
    make_session,
    make_task,
    make_user,
)
from tests.servers import free_port

NAMESPACES = ("dashboard", "tasks")
# Top-level URL prefixes that are not the dashboard (each probed elsewhere or public).
ELSEWHERE = ("api/v1/", "admin/", "accounts/", "healthz", "readyz", "metrics")
RANK = {"viewer": 0, "operator": 1, "admin": 2}
SIGNED_IN = "signed-in"  # any signed-in person, member of a project or not

# URL name -> (the methods its view answers, the least role that may use it).
LEAST_ROLE: dict[str, tuple[tuple[str, ...], str]] = {
    "dashboard:home": (("GET",), SIGNED_IN),
    "dashboard:switch_project": (("GET",), "viewer"),
    "dashboard:new_project": (("GET", "POST"), SIGNED_IN),
    "dashboard:overview": (("GET",), "viewer"),
    "dashboard:session_list": (("GET",), "viewer"),
    "dashboard:webhooks": (("GET",), "admin"),
    "dashboard:webhook_create": (("POST",), "admin"),
    "dashboard:webhook_toggle": (("POST",), "admin"),
    "dashboard:webhook_delete": (("POST",), "admin"),
    "dashboard:webhook_redeliver": (("POST",), "admin"),
    "dashboard:retention": (("GET",), "viewer"),
    "dashboard:retention_policy": (("POST",), "admin"),
    "dashboard:retention_run": (("POST",), "admin"),
    "dashboard:retention_hold": (("POST",), "admin"),
    "dashboard:retention_lift": (("POST",), "admin"),
    "dashboard:erasure": (("GET",), "admin"),
    "dashboard:erasure_preview": (("POST",), "admin"),
    "dashboard:erasure_confirm": (("POST",), "admin"),
    "dashboard:erasure_receipt": (("GET",), "admin"),
    "dashboard:session_detail": (("GET",), "viewer"),
    "dashboard:session_events": (("GET",), "viewer"),
    "dashboard:session_inspector": (("GET",), "viewer"),
    "dashboard:session_export": (("GET",), "viewer"),
    "dashboard:session_artifact": (("GET",), "viewer"),
    "dashboard:session_pause": (("POST",), "operator"),
    "dashboard:session_resume": (("POST",), "operator"),
    "dashboard:session_close": (("POST",), "operator"),
    "dashboard:session_fork": (("POST",), "operator"),
    "dashboard:session_delete": (("POST",), "admin"),
    "dashboard:handoff_queue": (("GET",), "viewer"),
    "dashboard:handoff_detail": (("GET",), "viewer"),
    "dashboard:handoff_messages": (("GET",), "viewer"),
    "dashboard:handoff_claim": (("POST",), "operator"),
    "dashboard:handoff_release": (("POST",), "operator"),
    "dashboard:handoff_renew": (("POST",), "operator"),
    "dashboard:handoff_reassign": (("POST",), "admin"),
    "dashboard:handoff_respond": (("POST",), "operator"),
    "dashboard:handoff_accept": (("POST",), "operator"),
    "dashboard:handoff_reject": (("POST",), "operator"),
    "dashboard:handoff_edit": (("POST",), "operator"),
    "dashboard:handoff_budget": (("POST",), "operator"),
    "dashboard:handoff_state": (("POST",), "operator"),
    "dashboard:handoff_facts": (("POST",), "operator"),
    "dashboard:handoff_take_over": (("POST",), "operator"),
    "dashboard:handoff_message": (("POST",), "operator"),
    "dashboard:handoff_hand_back": (("POST",), "operator"),
    "dashboard:handoff_close": (("POST",), "operator"),
    "dashboard:handoff_ignore": (("POST",), "operator"),
    "dashboard:handoff_next": (("GET",), "operator"),
    "dashboard:handoff_waiting": (("GET",), "viewer"),
    "dashboard:handoff_digest": (("GET", "POST"), "admin"),
    "dashboard:project_settings": (("GET",), "viewer"),
    "dashboard:project_rename": (("POST",), "admin"),
    "dashboard:project_handoff_settings": (("POST",), "admin"),
    "dashboard:members": (("GET",), "viewer"),
    "dashboard:member_add": (("POST",), "admin"),
    "dashboard:member_role": (("POST",), "admin"),
    "dashboard:member_remove": (("POST",), "admin"),
    "dashboard:invitation_resend": (("POST",), "admin"),
    "dashboard:invitation_revoke": (("POST",), "admin"),
    "dashboard:api_keys": (("GET",), "admin"),
    "dashboard:api_key_create": (("POST",), "admin"),
    "dashboard:api_key_revoke": (("POST",), "admin"),
    "dashboard:audit_log": (("GET",), "admin"),
    "tasks:list": (("GET",), "viewer"),
    "tasks:detail": (("GET",), "viewer"),
}

# Valid bodies, so that a refusal can only come from who asks (w: the world of the ids used).
BODIES: dict[str, Any] = {
    "dashboard:new_project": lambda w: {"name": "probe project"},
    "dashboard:webhook_create": lambda w: {
        "url": "https://hooks.example.com/probe",
        "events": ["session.paused"],
    },
    "dashboard:webhook_toggle": lambda w: {"active": "false"},
    "dashboard:retention_policy": lambda w: {
        "compact_after": "30",
        "archive_closed_after": "7",
        "action": "save",
        "agents-TOTAL_FORMS": "0",
        "agents-INITIAL_FORMS": "0",
    },
    "dashboard:retention_hold": lambda w: {"target": "project", "reason": "probe"},
    # A subject nobody matches: previewed and queued, it erases nothing.
    "dashboard:erasure_preview": lambda w: {"external_id": "nobody-probe"},
    "dashboard:erasure_confirm": lambda w: {"external_id": "nobody-probe", "confirm": "yes"},
    "dashboard:session_pause": lambda w: {"reason": "probe"},
    "dashboard:session_fork": lambda w: {"at_seq": 2},
    "dashboard:handoff_reassign": lambda w: {"to_user": w["operator_pk"]},
    "dashboard:handoff_respond": lambda w: {"text": "probe"},
    "dashboard:handoff_edit": lambda w: {"args": '{"order": "A-1"}', "confirm": "on"},
    "dashboard:handoff_budget": lambda w: {"max_tokens": "5000"},
    "dashboard:handoff_state": lambda w: {"patch": '{"stage": "probe"}', "confirm": "on"},
    "dashboard:handoff_facts": lambda w: {"key": "probe", "value": "true"},
    "dashboard:handoff_message": lambda w: {"text": "probe"},
    "dashboard:project_rename": lambda w: {"name": "renamed by the probe"},
    "dashboard:project_handoff_settings": lambda w: {
        "question_due_minutes": 30,
        "approval_due_minutes": 30,
        "takeover_due_minutes": 15,
        "budget_due_minutes": 60,
        "expire_after_overdue_minutes": 1440,
        "lease_minutes": 10,
    },
    "dashboard:member_add": lambda w: {"user": w["stranger"], "role": "admin"},
    "dashboard:member_role": lambda w: {"role": "admin"},
    "dashboard:api_key_create": lambda w: {"name": "probe key", "scope": "admin"},
    "dashboard:handoff_digest": lambda w: {"emails": "probe@example.com", "interval": 3600},
}
QUERIES: dict[str, Any] = {
    "dashboard:switch_project": lambda w: {"project": w["project_id"]},
    "dashboard:session_events": lambda w: {"before_seq": 3},
    "dashboard:session_inspector": lambda w: {"at_seq": 2},
    "dashboard:handoff_messages": lambda w: {"before_seq": 3},
}


def dashboard_urls() -> dict[str, list[str]]:
    """Every named URL of the dashboard's namespaces -> its keyword arguments; and no page
    outside them but the known prefixes."""
    found: dict[str, list[str]] = {}
    resolver = get_resolver()

    def walk(namespace: str, patterns: list[Any]) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(namespace, pattern.url_patterns)
            else:
                found[f"{namespace}:{pattern.name}"] = sorted(pattern.pattern.converters)

    for namespace in NAMESPACES:
        _, sub = resolver.namespace_dict[namespace]
        walk(namespace, sub.url_patterns)
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver) and pattern.namespace in NAMESPACES:
            continue
        route = str(pattern.pattern)
        assert isinstance(pattern, URLPattern | URLResolver)
        assert route.startswith(ELSEWHERE), f"a top-level URL the probe does not know: {route}"
    return found


def build_world(project, tag: str) -> dict[str, Any]:
    """A project's objects, one of each kind the dashboard's URLs name."""
    secret = f"secret-{tag}-{project.pk}"
    session = make_session(project, title=secret, metadata={"owner": tag})
    make_artifact(session, "probe.txt", secret.encode())
    append_events(
        session,
        [
            EventDraft(kind="message", role="user", content={"text": f"{secret} hello"}),
            EventDraft(kind="state", content={"stage": "probing"}),
            EventDraft(kind="fact", content={"key": "owner", "value": tag}),
        ],
        actor=Actor.system("probe"),
    )
    handoff = request_handoff(
        make_session(project, title=f"{secret} asks"),
        kind="approval",
        reason=secret,
        payload={
            "action_request": {"action": "refund", "args": {"order": "A-1"}},
            "config": {
                "allow_accept": True,
                "allow_edit": True,
                "allow_respond": True,
                "allow_ignore": True,
            },
            "description": secret,
        },
        actor=Actor.system("probe"),
    ).handoff
    task = make_task(project)
    key, _ = make_api_key(project, name=f"{secret} key")
    create_endpoint(
        project,
        url=f"http://127.0.0.1:{free_port()}/{tag}",
        events=["session.paused"],
        actor=Actor.system("probe"),
    )
    paused = make_session(project, title=f"{secret} paused")
    pause_session(paused, actor=Actor.system("probe"), reason="a delivery")
    place_hold(project, session=session, reason=secret, actor=Actor.system("probe"))
    viewer = make_member(project, Role.VIEWER)
    invitation = invite_member(
        project,
        f"invitee-{tag}-{project.pk}@example.com",
        role=Role.VIEWER,
        actor=Actor.system("probe"),
        base_url="http://testserver/",
    )
    return {
        "secret": secret,
        "project_id": project.pk,
        "session_id": session.pk,
        "name": "probe.txt",  # an artifact of the session
        "task_id": task.pk,
        "handoff_id": handoff.pk,
        "member_id": Membership.objects.get(project=project, user=viewer).pk,
        "key_id": key.pk,
        "endpoint_id": WebhookEndpoint.objects.get(project=project).pk,
        "delivery_id": WebhookDelivery.objects.get(project=project).pk,
        "hold_id": LegalHold.objects.get(project=project).pk,
        "erasure_id": make_erasure(project).pk,
        "invitation_id": invitation.public_id,
        "stranger": make_user().username,
    }


def drained(response) -> bytes:
    if not response.streaming:
        return response.content

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    if response.is_async:
        return async_to_sync(collect)()
    return b"".join(response.streaming_content)
