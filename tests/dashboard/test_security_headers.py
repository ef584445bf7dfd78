"""Every dashboard page, fragment and API answer carries a strict Content-Security-Policy and a
Permissions-Policy that turns off the powerful browser features (issue 8, defect 6)."""

import re

import pytest
from django.test import Client

from tests.dashboard.conftest import Team, session, team  # noqa: F401  (personas, seq 1..6)
from tests.factories import make_api_key, make_task

pytestmark = pytest.mark.django_db

STRICT = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data:",
    "object-src": "'none'",
    "base-uri": "'none'",
    "frame-ancestors": "'none'",
    "form-action": "'self'",
}


def directives(header: str) -> dict[str, str]:
    parsed = {}
    for part in header.split(";"):
        name, _, value = part.strip().partition(" ")
        parsed[name] = value
    return parsed


def assert_strict_headers(response, *, websocket_origin: str = "ws://testserver") -> None:
    policy = directives(response["Content-Security-Policy"])
    for name, value in STRICT.items():
        assert policy[name] == value, (name, policy)
    assert policy["connect-src"].split() == ["'self'", websocket_origin], policy
    assert "unsafe-inline" not in response["Content-Security-Policy"]
    assert "unsafe-eval" not in response["Content-Security-Policy"]
    permissions = response["Permissions-Policy"]
    for feature in ("camera=()", "microphone=()", "geolocation=()", "payment=()", "usb=()"):
        assert feature in permissions, permissions


def test_every_dashboard_page_answers_with_the_policies(team: Team, session):
    task = make_task(team.project)
    client = team.client("admin")
    pages = [
        "/accounts/login/",
        "/",
        f"/p/{team.project.pk}/",
        f"/p/{team.project.pk}/sessions/",
        f"/sessions/{session.pk}/",
        f"/sessions/{session.pk}/events/",
        f"/sessions/{session.pk}/inspector/?at=3",
        f"/sessions/{session.pk}/export.jsonl",
        f"/p/{team.project.pk}/tasks/",
        f"/tasks/{task.pk}/",
        "/sessions/00000000-0000-0000-0000-000000000000/",  # the friendly 404 page
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code in (200, 302, 404), (url, response.status_code)
        assert_strict_headers(response)
    # An htmx fragment and an action answer carry them too.
    fragment = client.get(f"/p/{team.project.pk}/sessions/", headers={"HX-Request": "true"})
    assert_strict_headers(fragment)
    assert_strict_headers(client.post(f"/sessions/{session.pk}/pause/"))


def test_signed_out_pages_carry_the_policies():
    client = Client()
    assert_strict_headers(client.get("/accounts/login/"))
    assert_strict_headers(client.get("/"))  # the redirect to sign-in


def test_the_pages_hold_nothing_inline_for_the_policy_to_block(team: Team, session):
    """script-src and style-src are 'self' alone: every script is a file, and no page has an
    inline <script>, <style>, style attribute or event handler attribute."""
    make_task(team.project)
    client = team.client("admin")  # the project switcher, the session's budget bars
    urls = [
        f"/p/{team.project.pk}/",
        f"/p/{team.project.pk}/sessions/",
        f"/sessions/{session.pk}/",
        f"/p/{team.project.pk}/tasks/",
    ]
    for url in urls:
        html = client.get(url).content.decode()
        scripts = re.findall(r"<script[^>]*>", html)
        assert scripts and all(" src=" in tag for tag in scripts), (url, scripts)
        assert "<style" not in html, url
        assert not re.search(r"\sstyle=", html), url
        assert not re.search(r"\son[a-z]+=", html), url


def test_the_secure_websocket_origin_is_allowed_over_https(team: Team, session):
    response = team.client("viewer").get(f"/sessions/{session.pk}/", secure=True)
    assert_strict_headers(response, websocket_origin="wss://testserver")


def test_the_api_and_its_docs_answer_with_the_policies(team: Team):
    _, raw_key = make_api_key(team.project)
    client = Client()
    authed = client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {raw_key}"})
    assert authed.status_code == 200
    assert_strict_headers(authed)
    assert_strict_headers(client.get("/api/v1/sessions"))  # 401 in the JSON error shape
    assert_strict_headers(client.get("/api/v1/no-such-thing"))
    assert_strict_headers(client.get("/api/v1/openapi.json"))
    assert_strict_headers(client.get("/api/v1/docs"))


def test_a_refused_host_gets_the_policies_without_a_websocket_origin():
    """The websocket origin is taken from a host ALLOWED_HOSTS accepted, never from another."""
    response = Client().get("/accounts/login/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert directives(response["Content-Security-Policy"])["connect-src"] == "'self'"
    assert "evil.example" not in response["Content-Security-Policy"]
    assert "camera=()" in response["Permissions-Policy"]
