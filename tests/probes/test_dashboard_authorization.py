"""Probe 2: the dashboard's authorization, from the outside (issue 23).

Every URL pattern of the dashboard (walked from the URLconf: the "dashboard" and "tasks"
namespaces; anything else at the top level must be the API, the Django admin, sign-in or the
health checks) is requested with GET and with POST, by every persona: anonymous, a viewer, an
operator and an admin of the own project, and an outsider (an admin of another project only);
with the own project's object ids, with another project's, and mixed (the own project in the
URL, another project's object after it). The expected answer comes from LEAST_ROLE, a table
written here from DESIGN.md's roles (read-only for viewers, actions for operators, settings,
keys, members, webhooks, policy for admins), checked against what the handoff views declare:

  wrong method → 405 · anonymous → redirect to sign in · not a member of the object's project
  → 404 · below the least role → 403 (mixed ids: 403 or 404) · otherwise the view works.

Every refused try: that status, no 5xx, neither project's secret text in the answer, no row
changed anywhere (dbstate.py). Every allowed try (a control, rolled back after): not refused,
no 5xx. The Django admin's pages, for the same personas (none of them staff): never shown.
"""

from typing import Any
from urllib.parse import quote

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib import admin
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from core.actors import Actor
from core.models import ApiKey, Membership, Role, WebhookDelivery, WebhookEndpoint
from core.services.webhooks import create_endpoint
from handoffs_app.services.handoffs import request_handoff
from retention_app.models import LegalHold
from retention_app.services.holds import place_hold
from sessions_app.models import Session
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import pause_session
from sessions_app.services.snapshots import drain
from switchboard import handoff_views
from tests.factories import (
    make_api_key,
    make_member,
    make_project,
    make_session,
    make_task,
    make_user,
)
from tests.probes.dbstate import changed_tables, checksums
from tests.probes.summary import report
from tests.servers import free_port

pytestmark = pytest.mark.django_db(transaction=True)

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
    "dashboard:session_detail": (("GET",), "viewer"),
    "dashboard:session_events": (("GET",), "viewer"),
    "dashboard:session_inspector": (("GET",), "viewer"),
    "dashboard:session_export": (("GET",), "viewer"),
    "dashboard:session_pause": (("POST",), "operator"),
    "dashboard:session_resume": (("POST",), "operator"),
    "dashboard:session_close": (("POST",), "operator"),
    "dashboard:session_fork": (("POST",), "operator"),
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
    "dashboard:project_settings": (("GET",), "viewer"),
    "dashboard:project_rename": (("POST",), "admin"),
    "dashboard:project_handoff_settings": (("POST",), "admin"),
    "dashboard:members": (("GET",), "viewer"),
    "dashboard:member_add": (("POST",), "admin"),
    "dashboard:member_role": (("POST",), "admin"),
    "dashboard:member_remove": (("POST",), "admin"),
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
    return {
        "secret": secret,
        "project_id": project.pk,
        "session_id": session.pk,
        "task_id": task.pk,
        "handoff_id": handoff.pk,
        "member_id": Membership.objects.get(project=project, user=viewer).pk,
        "key_id": key.pk,
        "endpoint_id": WebhookEndpoint.objects.get(project=project).pk,
        "delivery_id": WebhookDelivery.objects.get(project=project).pk,
        "hold_id": LegalHold.objects.get(project=project).pk,
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


def test_probe_dashboard_authorization():
    urls = dashboard_urls()
    assert sorted(set(urls) - set(LEAST_ROLE)) == [], "dashboard URLs without a least role"
    assert sorted(set(LEAST_ROLE) - set(urls)) == [], "least roles of URLs that are gone"
    # What the handoff views declare agrees with the table.
    for name, (_, minimum, _) in handoff_views.ACTIONS.items():
        assert LEAST_ROLE[f"dashboard:handoff_{name}"][1] == str(minimum), name

    own, other = make_project(), make_project()
    people = {
        "viewer": make_member(own, Role.VIEWER),
        "operator": make_member(own, Role.OPERATOR),
        "admin": make_member(own, Role.ADMIN),
        "outsider": make_member(other, Role.ADMIN),
    }
    worlds = {"own": build_world(own, "own"), "other": build_world(other, "other")}
    for world in worlds.values():
        world["operator_pk"] = people["operator"].pk
    assert ApiKey.objects.count() == 2 and WebhookEndpoint.objects.count() == 2
    mixed = {**worlds["other"], "project_id": own.pk}  # own project, the other's objects
    id_sets = {"own": worlds["own"], "other": worlds["other"], "mixed": mixed}

    clients: dict[str, Client] = {"anonymous": Client(raise_request_exception=False)}
    for persona, user in people.items():
        clients[persona] = Client(raise_request_exception=False)
        clients[persona].force_login(user)
    secrets = [w["secret"].encode() for w in worlds.values()]

    refused = 0
    controls = 0
    failures: list[str] = []
    server_errors: list[str] = []

    def request(persona: str, method: str, name: str, ids: dict[str, Any]):
        kwargs = {k: ids[k] for k in urls[name]}
        url = reverse(name, kwargs=kwargs)
        client = clients[persona]
        if method == "GET":
            query = QUERIES.get(name, lambda w: {})(ids)
            return url, query, client.get(url, query)
        return url, {}, client.post(url, BODIES.get(name, lambda w: {})(ids))

    def expected(name: str, method: str, persona: str, which: str) -> set[int] | None:
        """The statuses a refused try may answer; None: the try is allowed."""
        methods, least = LEAST_ROLE[name]
        if method not in methods:
            return {405}
        if persona == "anonymous":
            return {302}
        if least == SIGNED_IN:
            return None
        member_of = "other" if persona == "outsider" else "own"
        if which == "mixed" and persona != "outsider":
            return {404} if RANK[persona] >= RANK[least] else {403, 404}
        if which != member_of:
            return {404}
        if RANK.get(persona, 2) < RANK[least]:
            return {403}
        return None

    def unchanged(label: str, before):
        after = checksums()
        changed = changed_tables(before, after)
        if changed:
            failures.append(f"{label}: refused tries changed {changed}")
        return after

    drain()
    state = checksums()
    allowed_later: list[tuple[str, str, str]] = []
    for name in sorted(urls):
        for which, ids in id_sets.items():
            if which == "mixed" and not (len(urls[name]) > 1 and "project_id" in urls[name]):
                continue
            if not urls[name] and which != "own":
                continue  # no ids in the URL (home, new_project): once
            for persona in clients:
                if which != "own" and persona in ("anonymous", "outsider") and which == "other":
                    continue  # the outsider is the other project's admin; anonymous: as own
                for method in ("GET", "POST"):
                    if method not in LEAST_ROLE[name][0] and which != "own":
                        continue  # a wrong method is refused whatever the ids: once
                    statuses = expected(name, method, persona, which)
                    if statuses is None:
                        if which == "own":
                            allowed_later.append((name, method, persona))
                        continue
                    url, query, response = request(persona, method, name, ids)
                    refused += 1
                    label = f"{persona} {method} {url} ({which} ids)"
                    status = response.status_code
                    body = drained(response)
                    if status >= 500:
                        server_errors.append(f"{label}: {status}")
                    if status not in statuses:
                        failures.append(f"{label}: {status}, expected {sorted(statuses)}")
                    elif status == 302:
                        full = url + (f"?{response.request['QUERY_STRING']}" if query else "")
                        login = f"{reverse(settings.LOGIN_URL)}?next={quote(full)}"
                        if response["Location"] != login:
                            failures.append(f"{label}: redirected to {response['Location']}")
                    shown = [s for s in secrets if s in body]
                    if shown:
                        failures.append(f"{label}: the refusal shows {shown}")
            state = unchanged(f"{name} ({which} ids)", state)

    # Special cases: switching to another project's id; home for everyone.
    for persona in ("viewer", "operator", "admin"):
        response = clients[persona].get(reverse("dashboard:switch_project"), {"project": other.pk})
        refused += 1
        if response.status_code != 404:
            failures.append(f"{persona} switched to the other project: {response.status_code}")
    state = unchanged("switch_project (other)", state)

    # The Django admin: no persona here is staff; every registered model's list and add page.
    admin_pages = ["/admin/"]
    for model in admin.site._registry:
        meta = model._meta
        admin_pages += [
            reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"),
            reverse(f"admin:{meta.app_label}_{meta.model_name}_add"),
        ]
    admin_tries = 0
    for persona in clients:
        for url in admin_pages:
            method = "post" if url.endswith("/add/") else "get"
            response = getattr(clients[persona], method)(url)
            admin_tries += 1
            if response.status_code not in (302, 403) or (
                response.status_code == 302 and "login" not in response["Location"]
            ):
                failures.append(f"{persona} {method} {url}: {response.status_code}")
    state = unchanged("django admin", state)

    # Controls: every allowed try, rolled back after, is not refused.
    for name, method, persona in allowed_later:
        with transaction.atomic():
            url, _, response = request(persona, method, name, worlds["own"])
            drained(response)
            transaction.set_rollback(True)
        controls += 1
        status = response.status_code
        if status >= 500:
            server_errors.append(f"control {persona} {method} {url}: {status}")
        if status in (401, 403, 404, 405):
            failures.append(f"control {persona} {method} {url}: refused with {status}")

    report(
        "dashboard authorization",
        urls=len(urls),
        tries=refused,
        controls=controls,
        admin_site_tries=admin_tries,
        server_errors=len(server_errors),
        failures=len(failures),
    )
    assert not server_errors + failures, "\n".join(server_errors + failures[:40])
    assert Session.objects.filter(project=own).count() == 3
