"""Inviting by e-mail from the members page, and following the link: who may invite, resend
and revoke (admins of the project only), CSRF, the address escaped where shown, and the link's
pages (choose a password, then signed in on the project; a dead link gets a friendly 404)."""

import re
import uuid
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from core.actors import Actor
from core.models import AuditEntry, Invitation, Membership, Role
from core.services.invitations import invite_member
from tests.dashboard.test_console import url, world
from tests.servers import free_port

PASSWORD = "a-long-enough-pass-4817"
LINK = re.compile(r"http://testserver(/accounts/invitations/[0-9a-f-]{36}/\S+/)")


def invite(team, email="nia@example.com", role=Role.OPERATOR) -> Invitation:
    return invite_member(
        team.project,
        email,
        role=role,
        actor=Actor.for_user(team.admin),
        base_url="http://testserver/",
    )


def link_path(message=None) -> str:
    [path] = LINK.findall((message or mail.outbox[-1]).body)
    return path


def state() -> tuple:
    return (
        world(),
        sorted(Invitation.objects.values_list("email", "role", "sent_at")),
        get_user_model().objects.count(),
        len(mail.outbox),
    )


# --- The members page -------------------------------------------------------------------------


def test_an_admin_invites_an_address_without_an_account(team):
    client = team.client("admin")
    response = client.post(url("member_add", team), {"user": "nia@example.com", "role": "operator"})
    assert response.status_code == 302
    assert response["Location"] == url("members", team) + "#invitations"
    invitation = Invitation.objects.get(project=team.project)
    assert (invitation.email, invitation.role, invitation.invited_by) == (
        "nia@example.com",
        "operator",
        team.admin,
    )
    [message] = mail.outbox
    assert message.to == ["nia@example.com"] and link_path(message)
    page = client.get(url("members", team)).content.decode()
    assert "Invitation e-mailed to nia@example.com. Role: operator." in page
    row = page[page.index(f'id="invitation-{invitation.public_id}"') :]
    row = row[: row.index("</tr>")]
    assert "nia@example.com" in row and team.admin.username in row and "expires" in row
    assert AuditEntry.objects.filter(action="invitation.create", user=team.admin).count() == 1


def test_with_the_console_backend_the_page_says_where_the_link_went(team, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    client = team.client("admin")
    client.post(url("member_add", team), {"user": "oz@example.com", "role": "viewer"})
    page = client.get(url("members", team)).content.decode()
    assert "written to the server&#x27;s console output" in page


def test_the_address_is_escaped_on_the_page(team):
    hostile = '"<img/src=x/onerror=alert(1)>"@example.com'
    response = team.client("admin").post(
        url("member_add", team), {"user": hostile, "role": "viewer"}
    )
    assert response.status_code == 302
    page = team.client("admin").get(url("members", team)).content.decode()
    assert "<img" not in page
    assert "&quot;&lt;img/src=x/onerror=alert(1)&gt;&quot;@example.com" in page


@pytest.mark.parametrize("who", ["operator", "viewer"])
def test_only_admins_invite_resend_and_revoke(team, who):
    invitation = invite(team)
    before = state()
    client = team.client(who)
    assert (
        client.post(
            url("member_add", team), {"user": "x@example.com", "role": "viewer"}
        ).status_code
        == 403
    )
    for action in ("invitation_resend", "invitation_revoke"):
        assert client.post(url(action, team, invitation.public_id)).status_code == 403
    page = client.get(url("members", team)).content.decode()
    assert "Pending invitations" not in page and invitation.email not in page
    assert state() == before


def test_another_projects_admin_gets_404_and_ids_do_not_cross_projects(team):
    invitation = invite(team)
    before = state()
    outsider = team.client("outsider")
    assert outsider.post(url("invitation_revoke", team, invitation.public_id)).status_code == 404
    # The outsider's own project's URL with this project's invitation: not found either.
    other = reverse(
        "dashboard:invitation_revoke", args=[team.other_project.pk, invitation.public_id]
    )
    assert outsider.post(other).status_code == 404
    assert (
        team.client("admin").post(url("invitation_resend", team, uuid.uuid4())).status_code == 404
    )
    assert state() == before


def test_resend_and_revoke_take_post_only_with_a_csrf_token(team):
    invitation = invite(team)
    before = state()
    admin = team.client("admin")
    assert admin.get(url("invitation_revoke", team, invitation.public_id)).status_code == 405
    guarded = team.client("admin", enforce_csrf_checks=True)
    assert guarded.post(url("invitation_revoke", team, invitation.public_id)).status_code == 403
    assert (
        guarded.post(
            url("member_add", team), {"user": "p@example.com", "role": "viewer"}
        ).status_code
        == 403
    )
    assert state() == before


def test_an_admin_resends_and_revokes(team):
    invitation = invite(team)
    first = link_path()
    admin = team.client("admin")
    assert admin.post(url("invitation_resend", team, invitation.public_id)).status_code == 302
    assert len(mail.outbox) == 2
    assert admin.post(url("invitation_revoke", team, invitation.public_id)).status_code == 302
    assert not Invitation.objects.exists()
    page = admin.get(url("members", team)).content.decode()
    assert "Invitation for nia@example.com revoked" in page
    for path in (first, link_path()):
        dead = Client().get(path)
        assert dead.status_code == 404
        assert b"This invitation link no longer works" in dead.content
    actions = AuditEntry.objects.filter(action__startswith="invitation.").values_list(
        "action", flat=True
    )
    assert list(actions.order_by("pk")) == [
        "invitation.create",
        "invitation.resend",
        "invitation.revoke",
    ]


def test_a_refusing_mail_server_is_said_and_the_invitation_listed(team, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 2
    client = team.client("admin")
    response = client.post(
        url("member_add", team), {"user": "q@example.com", "role": "viewer"}, follow=True
    )
    page = response.content.decode()
    assert "could not be sent" in page and "then resend it" in page
    assert 'class="invitation-email">q@example.com' in page


def test_inviting_the_same_address_twice_is_a_conflict(team):
    invite(team)
    before = state()
    response = team.client("admin").post(
        url("member_add", team), {"user": "nia@example.com", "role": "admin"}
    )
    assert response.status_code == 409
    assert b"already invited" in response.content and b"Nothing was changed." in response.content
    assert state() == before


# --- Following the link -----------------------------------------------------------------------


def test_the_invitee_chooses_a_password_and_lands_on_the_project(team):
    invitation = invite(team)
    browser = Client()
    response = browser.get(link_path())
    password_page = reverse("invitation_set_password", args=[invitation.public_id])
    assert (
        response.status_code == 302 and response["Location"] == password_page
    )  # token out of the URL
    page = browser.get(password_page)
    assert page.status_code == 200
    assert f"Join {team.project.name}".encode() in page.content
    assert b"invited you as <strong>operator</strong>" in page.content

    response = browser.post(password_page, {"new_password1": PASSWORD, "new_password2": PASSWORD})

    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:overview", args=[team.project.pk])
    overview = browser.get(response["Location"])
    assert overview.status_code == 200
    assert b"You are signed in as nia@example.com" in overview.content
    user = get_user_model().objects.get(email="nia@example.com")
    assert Membership.objects.get(project=team.project, user=user).role == Role.OPERATOR
    assert int(browser.session["_auth_user_id"]) == user.pk
    # Once: the link, and the password page, are dead now.
    assert browser.get(link_path()).status_code == 404
    again = Client()
    assert again.get(link_path()).status_code == 404
    assert (
        browser.post(password_page, {"new_password1": "x", "new_password2": "x"}).status_code == 404
    )


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        (PASSWORD, PASSWORD + "x", "The two password fields didn’t match."),
        ("password", "password", "This password is too common."),
        ("nia@example.com", "nia@example.com", "The password is too similar"),
    ],
)
def test_a_refused_password_says_why_and_changes_nothing(team, first, second, message):
    invite(team)
    browser = Client()
    password_page = browser.get(link_path())["Location"]
    before = state()
    response = browser.post(password_page, {"new_password1": first, "new_password2": second})
    assert response.status_code == 400
    assert message.encode() in response.content.replace(b"&#x27;", b"'")
    assert state() == before
    assert "_auth_user_id" not in browser.session


def test_the_password_page_without_the_link_is_refused(team):
    invitation = invite(team)
    response = Client().get(reverse("invitation_set_password", args=[invitation.public_id]))
    assert response.status_code == 404
    assert b"This invitation link no longer works" in response.content


def test_an_expired_link_gets_the_friendly_page(team, settings):
    settings.PASSWORD_RESET_TIMEOUT = 3600
    invite(team)
    with time_machine.travel(timezone.now() + timedelta(hours=2)):
        response = Client().get(link_path())
    assert response.status_code == 404
    assert b"(a link lasts 1 hour)" in response.content
    assert b"This invitation link no longer works" in response.content


@pytest.mark.parametrize(
    "path",
    [
        "/accounts/invitations/{id}/1-2-3/",
        "/accounts/invitations/{id}/zzzzzz-{long}/",
        "/accounts/invitations/{other}/abc-def/",
        "/accounts/invitations/{id}/%00%ff/",
    ],
)
def test_a_bad_link_gets_the_friendly_page(team, path):
    invitation = invite(team)
    path = path.format(id=invitation.public_id, other=uuid.uuid4(), long="a" * 500)
    response = Client().get(path)
    assert response.status_code == 404
    assert b"This invitation link no longer works" in response.content


def test_the_password_page_takes_a_post_only_with_a_csrf_token(team):
    invitation = invite(team)
    browser = Client(enforce_csrf_checks=True)
    password_page = browser.get(link_path())["Location"]
    assert browser.get(password_page).status_code == 200
    before = state()
    response = browser.post(password_page, {"new_password1": PASSWORD, "new_password2": PASSWORD})
    assert response.status_code == 403
    assert state() == before
    assert not get_user_model().objects.get(pk=invitation.user_id).is_active
