"""Inviting a teammate without an account, in Chromium against a real uvicorn: the admin
invites an address on the members page, the server e-mails the link (Django's file-based
backend into a temporary folder: the server runs in another process, so the test reads the
file), the invitee opens it in a browser of their own, chooses a password and lands on the
project, signed in. Used again, the link shows the friendly page. No page breaks the CSP."""

import re
from email import message_from_string, policy
from email.message import EmailMessage
from pathlib import Path

import pytest
from playwright.sync_api import expect

from core.models import Invitation, Membership
from tests.browser.conftest import sign_in
from tests.browser.test_content_security_policy import RECORD_VIOLATIONS
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_session
from tests.servers import asgi_server

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "a-long-enough-pass-4817"


@pytest.fixture(scope="module")
def mail_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("outbox")


@pytest.fixture(scope="module")
def mailing_url(django_db_setup, django_db_blocker, mail_dir):
    """A server of its own, writing each e-mail to a file in `mail_dir`."""
    with (
        django_db_blocker.unblock(),
        asgi_server(
            EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend",
            EMAIL_FILE_PATH=str(mail_dir),
        ) as base_url,
    ):
        yield base_url


def watch_policy(page) -> list[str]:
    complaints: list[str] = []
    page.on(
        "console",
        lambda msg: complaints.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    page.add_init_script(RECORD_VIOLATIONS)
    return complaints


def mails(mail_dir: Path) -> list[EmailMessage]:
    """The messages the server wrote (each file holds a session's, dash-separated), parsed."""
    found = []
    for path in sorted(mail_dir.iterdir()):
        for raw in path.read_text().split("-" * 79):
            if raw.strip():
                found.append(message_from_string(raw.lstrip(), policy=policy.default))
    return found


def test_an_invited_teammate_sets_a_password_and_sees_the_project(
    team: Team, mailing_url, mail_dir, page, browser, screenshot
):
    make_session(team.project, title="Refund for order 4411")
    complaints = watch_policy(page)
    sign_in(page, mailing_url, team.admin.username)
    page.goto(f"{mailing_url}/p/{team.project.pk}/")
    page.get_by_role("link", name="Settings", exact=True).click()
    page.locator(".console-nav").get_by_role("link", name="Members").click()

    page.get_by_label("Username or e-mail").fill("nia@example.com")
    page.locator("#id_role").select_option("operator")
    page.get_by_role("button", name="Add or invite").click()

    expect(page.locator(".messages")).to_contain_text("Invitation e-mailed to nia@example.com")
    invitation = Invitation.objects.get(project=team.project)
    row = page.locator(f"#invitation-{invitation.public_id}")
    expect(row).to_contain_text("nia@example.com")
    expect(row).to_contain_text("operator")
    expect(row).to_contain_text(team.admin.username)
    expect(row.get_by_role("button", name="Resend")).to_be_visible()
    expect(row.get_by_role("button", name="Revoke")).to_be_visible()
    screenshot("invite_console")
    assert page.evaluate("window.__cspViolations || []") == [] and complaints == []

    [message] = mails(mail_dir)
    assert message["To"] == "nia@example.com"
    text = message.get_content()
    assert f'the project "{team.project.name}"' in text
    [link] = re.findall(rf"{re.escape(mailing_url)}/accounts/invitations/\S+/", text)

    # The invitee, in a browser of their own.
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    theirs = context.new_page()
    their_complaints = watch_policy(theirs)
    theirs.goto(link)
    expect(theirs).to_have_url(
        f"{mailing_url}/accounts/invitations/{invitation.public_id}/set-password/"
    )
    expect(theirs.get_by_role("heading", name=f"Join {team.project.name}")).to_be_visible()
    theirs.get_by_label("New password", exact=True).fill("short")
    theirs.get_by_label("New password again").fill("short")
    theirs.get_by_role("button", name="Set password and join").click()
    expect(theirs.get_by_role("alert")).to_contain_text("too short")
    screenshot_of(theirs, "invite_set_password")

    theirs.get_by_label("New password", exact=True).fill(PASSWORD)
    theirs.get_by_label("New password again").fill(PASSWORD)
    theirs.get_by_role("button", name="Set password and join").click()

    expect(theirs).to_have_url(f"{mailing_url}/p/{team.project.pk}/")
    expect(theirs.locator(".messages")).to_contain_text(f"Welcome to {team.project.name}")
    expect(theirs.get_by_role("heading", name=team.project.name, exact=True)).to_be_visible()
    expect(theirs.locator(".role-badge")).to_have_text("operator")
    theirs.locator(".mainnav").get_by_role("link", name="Sessions").click()
    expect(theirs.locator("#session-rows")).to_contain_text("Refund for order 4411")
    assert Membership.objects.get(project=team.project, user__email="nia@example.com")
    assert theirs.evaluate("window.__cspViolations || []") == [] and their_complaints == []

    # Once only: the same link now says it no longer works.
    theirs.goto(link)
    expect(theirs.get_by_role("heading")).to_have_text("This invitation link no longer works")
    screenshot_of(theirs, "invite_link_used")
    context.close()

    page.reload()
    expect(page.locator("#invitations")).to_contain_text("None.")
    expect(page.locator(".members-table")).to_contain_text("nia@example.com")


def screenshot_of(page, name: str) -> None:
    from tests.browser.conftest import ARTIFACTS

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
