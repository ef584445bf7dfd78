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
from django.conf import settings
from django.contrib import admin
from django.db import transaction
from django.test import Client
from django.urls import reverse

from core.models import ApiKey, Role, WebhookEndpoint
from sessions_app.models import Session
from sessions_app.services.snapshots import drain
from switchboard.handoffs import views as handoff_views
from tests.factories import make_member, make_project
from tests.probes.dashboard import (
    BODIES,
    LEAST_ROLE,
    QUERIES,
    RANK,
    SIGNED_IN,
    build_world,
    dashboard_urls,
    drained,
)
from tests.probes.dbstate import changed_tables, checksums
from tests.probes.summary import report

pytestmark = pytest.mark.django_db(transaction=True)


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
