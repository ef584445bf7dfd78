"""Signing in through the real login form, in Chromium, against a real uvicorn."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_session

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_signs_in_and_lands_on_the_projects_overview(team: Team, live_url, page, screenshot):
    make_session(team.project, agent="triage", title="Refund for order 4411")
    page.goto(f"{live_url}/")
    # Anonymous: sent to the sign-in page, which remembers where to go next.
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    screenshot("login")

    page.fill("#id_username", team.viewer.username)
    page.fill("#id_password", "not-the-password")
    page.click("button[type=submit]")
    expect(page.get_by_role("alert")).to_have_text(
        "That username and password did not match. Try again."
    )

    sign_in(page, live_url, team.viewer.username)
    expect(page).to_have_url(f"{live_url}/p/{team.project.pk}/")
    expect(page.get_by_role("heading", name=team.project.name, exact=True)).to_be_visible()
    expect(page.locator(".role-badge")).to_have_text("viewer")
    expect(page.locator("#status-counts .stat-card .stat").first).to_have_text("1")
    expect(page.locator(".live-dot.on").first).to_be_attached()  # the overview's socket is up
    screenshot("overview")
