"""Probe 3: cross-site request forgery, from the outside (issue 23).

A signed-in admin's browser, driven by another site: every dashboard URL (walked from the
URLconf, the own project's ids), the sign-in pages and the Django admin's forms are POSTed with
CSRF checks on (Client(enforce_csrf_checks=True)) in each way a forged request can look: no
token and no cookie, the cookie but no token, a wrong token in the form or in the header htmx
uses, and the right token from a foreign Origin or (over https) a foreign Referer. Each must be
403 with nothing changed in the database. The agent API takes no cookie as a credential: the
admin's signed-in cookie alone on each of its writes is a 401.

Controls: the same admin with the right token reaches every POST URL (not 403; rolled back).
"""

import json
import uuid
from http.cookies import SimpleCookie

import pytest
from django.conf import settings
from django.contrib import admin
from django.db import transaction
from django.test import Client
from django.urls import reverse

from core.models import Role
from sessions_app.services.snapshots import drain
from tests.factories import make_member, make_project
from tests.probes.dashboard import BODIES, LEAST_ROLE, build_world, dashboard_urls, drained
from tests.probes.dbstate import changed_tables, checksums
from tests.probes.summary import report

pytestmark = pytest.mark.django_db(transaction=True)

WRONG = "x" * 64
AUTH_PAGES = ["login", "logout", "password_change", "password_reset"]


def test_probe_csrf():
    own = make_project()
    user = make_member(own, Role.ADMIN)
    world = build_world(own, "own")
    world["operator_pk"] = make_member(own, Role.OPERATOR).pk
    urls = dashboard_urls()

    client = Client(enforce_csrf_checks=True, raise_request_exception=False)
    client.force_login(user)
    assert client.get(reverse("dashboard:overview", args=[own.pk])).status_code == 200
    token = client.cookies[settings.CSRF_COOKIE_NAME].value
    session_cookie = client.cookies[settings.SESSION_COOKIE_NAME].value

    browser = Client(enforce_csrf_checks=True, raise_request_exception=False)

    def forged(variant: str, url: str, data: dict):
        """A POST as the signed-in admin's browser would send it, forged as `variant` says."""
        c = browser  # one client (building one loads the middleware), its cookies reset
        c.cookies = SimpleCookie()
        c.cookies[settings.SESSION_COOKIE_NAME] = session_cookie
        if variant != "no cookie, no token":
            c.cookies[settings.CSRF_COOKIE_NAME] = token
        headers: dict[str, str] = {}
        secure = False
        if variant == "wrong token in the form":
            data = {**data, "csrfmiddlewaretoken": WRONG}
        elif variant == "wrong token in the header":
            headers["X-CSRFToken"] = WRONG
        elif variant == "right token, foreign Origin":
            data = {**data, "csrfmiddlewaretoken": token}
            headers["Origin"] = "https://evil.example"
        elif variant == "right token, https, foreign Referer":
            data = {**data, "csrfmiddlewaretoken": token}
            headers["Referer"] = "https://evil.example/form"
            secure = True
        elif variant == "right token":  # the control
            data = {**data, "csrfmiddlewaretoken": token}
        return c.post(url, data, headers=headers, secure=secure)

    variants = [
        "no cookie, no token",
        "cookie, no token",
        "wrong token in the form",
        "wrong token in the header",
        "right token, foreign Origin",
        "right token, https, foreign Referer",
    ]
    targets: list[tuple[str, str, dict]] = []
    for name in sorted(urls):
        url = reverse(name, kwargs={k: world[k] for k in urls[name]})
        targets.append((name, url, BODIES.get(name, lambda w: {})(world)))
    for name in AUTH_PAGES:
        targets.append((name, reverse(name), {}))
    for model in admin.site._registry:
        meta = model._meta
        name = f"admin:{meta.app_label}_{meta.model_name}_add"
        targets.append((name, reverse(name), {}))

    failures: list[str] = []
    tries = 0
    drain()
    state = checksums()
    for _, url, data in targets:
        for variant in variants:
            response = forged(variant, url, data)
            tries += 1
            if response.status_code != 403 or b"Please reload the page" not in response.content:
                failures.append(f"{variant}: POST {url}: {response.status_code}")
        after = checksums()
        if changed_tables(state, after):
            failures.append(f"forged POSTs to {url} changed {changed_tables(state, after)}")
        state = after

    # The API: a signed-in browser's cookies are no credential there.
    api_tries = 0
    doc = client.get("/api/v1/openapi.json").json()
    for path, item in doc["paths"].items():
        for method in item:
            if method == "get":
                continue
            filled = path.format(
                session_id=world["session_id"],
                task_id=world["task_id"],
                handoff_id=world["handoff_id"],
                erasure_id=uuid.uuid4(),  # refused before any look-up: the cookie is no key
                key="draft",
                name="review_decision",
                key_id=world["key_id"],
                endpoint_id=world["endpoint_id"],
                sha256="0" * 64,
            )
            response = client.generic(
                method.upper(), filled, json.dumps({}), content_type="application/json"
            )
            api_tries += 1
            if response.status_code != 401:
                failures.append(f"cookie only: {method.upper()} {filled}: {response.status_code}")
    after = checksums()
    if changed_tables(state, after):
        failures.append(f"cookie-only API calls changed {changed_tables(state, after)}")

    # Controls: the right token, same origin: every POST URL of the dashboard is reached.
    controls = 0
    for name, url, data in targets:
        if name not in LEAST_ROLE or "POST" not in LEAST_ROLE[name][0]:
            continue
        with transaction.atomic():
            response = forged("right token", url, data)
            drained(response)
            transaction.set_rollback(True)
        controls += 1
        if response.status_code in (403, 405) or response.status_code >= 500:
            failures.append(f"control POST {url}: {response.status_code}")

    report(
        "csrf",
        post_urls=len(targets),
        tries=tries + api_tries,
        forged_posts=tries,
        api_cookie_only=api_tries,
        controls=controls,
        failures=len(failures),
    )
    assert not failures, "\n".join(failures[:40])
