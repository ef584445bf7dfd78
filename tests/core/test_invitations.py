"""Invitations through their services and the addmember command: the e-mail (Django's locmem
backend, mail.outbox), the one-time link that expires and dies with a revocation, accepting
into every inviting project, an account that exists being added instead, and a mail server
that refuses."""

import io
import re
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone

from core.actors import Actor
from core.errors import Conflict, InvalidInput, NotFound
from core.models import AuditEntry, Invitation, Membership, Role
from core.services.invitations import (
    InvitationLinkInvalid,
    InvitationNotSent,
    accept_invitation,
    add_or_invite,
    invitation_for_link,
    invite_member,
    is_pending,
    resend_invitation,
    revoke_invitation,
)
from tests.factories import make_member, make_project, make_user
from tests.servers import free_port

BASE = "https://switchboard.example.com/"
LINK = re.compile(r"https://switchboard\.example\.com/accounts/invitations/([0-9a-f-]{36})/(\S+)/")
PASSWORD = "a-long-enough-pass-4817"


def _admin(project, username="ada"):
    admin = make_member(project, Role.ADMIN, username=username)
    return admin, Actor.for_user(admin)


def _link(message) -> tuple[str, str]:
    """The invitation id and token of the (last) link in an e-mail."""
    found = LINK.findall(message.body)
    assert len(found) == 1, message.body
    return found[0]


def _audit(project) -> list[tuple[str, str]]:
    return list(
        AuditEntry.objects.filter(project=project, action__startswith="invitation.")
        .order_by("pk")
        .values_list("action", "actor")
    )


def test_it_invites_an_email_without_an_account_and_mails_a_link(db):
    project = make_project("Refunds & Returns")
    admin, actor = _admin(project)
    invitation = invite_member(
        project, " Alice@Example.COM ", role=Role.OPERATOR, actor=actor, base_url=BASE
    )

    assert invitation.email == "Alice@example.com"  # the domain part normalised
    user = invitation.user
    assert user.username == "Alice@example.com" and not user.is_active
    assert not user.has_usable_password() and is_pending(user)
    assert invitation.invited_by == admin and invitation.role == Role.OPERATOR
    assert not Membership.objects.filter(project=project, user=user).exists()
    assert _audit(project) == [("invitation.create", "user:ada")]

    [message] = mail.outbox
    assert message.to == ["Alice@example.com"]
    assert message.subject == "ada invited you to Refunds & Returns on Switchboard"
    assert 'the project "Refunds & Returns"' in message.body  # plain text: not HTML-escaped
    assert "as an operator (also acts on sessions and answers handoffs)" in message.body
    assert "expires on" in message.body and "(72 hours after" in message.body
    assert "You will sign in as Alice@example.com." in message.body
    public_id, token = _link(message)
    assert public_id == str(invitation.public_id)
    assert invitation_for_link(invitation.public_id, token) == invitation


def test_the_link_works_once(db):
    project = make_project()
    _, actor = _admin(project)
    invitation = invite_member(project, "bo@example.com", role="viewer", actor=actor, base_url=BASE)
    _, token = _link(mail.outbox[0])

    [membership] = accept_invitation(invitation, token=token, password=PASSWORD)

    user = get_user_model().objects.get(pk=invitation.user_id)
    assert user.is_active and user.check_password(PASSWORD)
    assert (membership.project, membership.user, membership.role) == (project, user, "viewer")
    assert not Invitation.objects.exists()
    assert _audit(project) == [
        ("invitation.create", "user:ada"),
        ("invitation.accept", "user:bo@example.com"),
    ]
    with pytest.raises(InvitationLinkInvalid):
        invitation_for_link(invitation.public_id, token)
    with pytest.raises(InvitationLinkInvalid):
        accept_invitation(invitation, token=token, password="another-pass-9921")
    user.refresh_from_db()
    assert user.check_password(PASSWORD)


def test_the_link_expires_after_password_reset_timeout(db, settings):
    settings.PASSWORD_RESET_TIMEOUT = 3600
    project = make_project()
    _, actor = _admin(project)
    invitation = invite_member(project, "cy@example.com", role="viewer", actor=actor, base_url=BASE)
    _, token = _link(mail.outbox[0])
    with time_machine.travel(timezone.now() + timedelta(minutes=59)):
        assert invitation_for_link(invitation.public_id, token) == invitation
    with time_machine.travel(timezone.now() + timedelta(minutes=61)):
        with pytest.raises(InvitationLinkInvalid):
            invitation_for_link(invitation.public_id, token)
        with pytest.raises(InvitationLinkInvalid):
            accept_invitation(invitation, token=token, password=PASSWORD)
    assert Invitation.objects.filter(pk=invitation.pk).exists()
    assert not get_user_model().objects.get(pk=invitation.user_id).is_active


def test_a_mistyped_token_or_another_invitations_token_is_refused(db):
    project = make_project()
    _, actor = _admin(project)
    first = invite_member(project, "d1@example.com", role="viewer", actor=actor, base_url=BASE)
    second = invite_member(project, "d2@example.com", role="viewer", actor=actor, base_url=BASE)
    _, first_token = _link(mail.outbox[0])
    with pytest.raises(InvitationLinkInvalid):
        invitation_for_link(second.public_id, first_token)
    with pytest.raises(InvitationLinkInvalid):
        invitation_for_link(first.public_id, first_token[:-1] + "x")
    with pytest.raises(InvitationLinkInvalid):
        invitation_for_link(first.public_id, "")


def test_revoking_kills_the_link_and_the_pending_user(db):
    project = make_project()
    _, actor = _admin(project)
    invitation = invite_member(project, "ed@example.com", role="admin", actor=actor, base_url=BASE)
    _, token = _link(mail.outbox[0])

    revoke_invitation(invitation, actor=actor)

    with pytest.raises(InvitationLinkInvalid):
        invitation_for_link(invitation.public_id, token)
    with pytest.raises(InvitationLinkInvalid):
        accept_invitation(invitation, token=token, password=PASSWORD)
    assert not get_user_model().objects.filter(email="ed@example.com").exists()
    assert _audit(project) == [("invitation.create", "user:ada"), ("invitation.revoke", "user:ada")]
    revoke_invitation(invitation, actor=actor)  # again: nothing left, nothing written
    assert len(_audit(project)) == 2


def test_revoking_one_of_two_projects_invitations_leaves_the_other_working(db):
    first, second = make_project(), make_project()
    _, actor1 = _admin(first, "ada")
    _, actor2 = _admin(second, "ben")
    gone = invite_member(first, "fay@example.com", role="viewer", actor=actor1, base_url=BASE)
    kept = invite_member(second, "fay@example.com", role="operator", actor=actor2, base_url=BASE)
    assert gone.user_id == kept.user_id  # one pending user for the address
    _, gone_token = _link(mail.outbox[0])
    _, kept_token = _link(mail.outbox[1])

    revoke_invitation(gone, actor=actor1)

    with pytest.raises(InvitationLinkInvalid):
        invitation_for_link(gone.public_id, gone_token)
    accept_invitation(kept, token=kept_token, password=PASSWORD)
    assert list(Membership.objects.filter(user_id=kept.user_id).values_list("project", "role")) == [
        (second.pk, "operator")
    ]


def test_accepting_joins_every_project_that_invited_them(db):
    first, second = make_project(), make_project()
    _, actor1 = _admin(first, "ada")
    _, actor2 = _admin(second, "ben")
    one = invite_member(first, "gus@example.com", role="viewer", actor=actor1, base_url=BASE)
    invite_member(second, "gus@example.com", role="admin", actor=actor2, base_url=BASE)
    _, token = _link(mail.outbox[0])

    accept_invitation(one, token=token, password=PASSWORD)

    roles = Membership.objects.filter(user_id=one.user_id).values_list("project", "role")
    assert sorted(roles) == sorted([(first.pk, "viewer"), (second.pk, "admin")])
    assert not Invitation.objects.exists()
    assert [a for a, _ in _audit(second)] == ["invitation.create", "invitation.accept"]


def test_someone_with_an_account_is_added_not_invited(db):
    project = make_project()
    _, actor = _admin(project)
    hal = make_user("hal")
    hal.email = "hal@example.com"
    hal.save()

    outcome = add_or_invite(project, "HAL@example.com", role="operator", actor=actor, base_url=BASE)

    assert outcome.invitation is None and outcome.membership.user == hal
    assert mail.outbox == [] and not Invitation.objects.exists()
    with pytest.raises(Conflict, match="hal already has an account"):
        invite_member(project, "hal@example.com", role="viewer", actor=actor, base_url=BASE)


def test_add_or_invite_invites_an_unknown_address_and_explains_an_unknown_username(db):
    project = make_project()
    _, actor = _admin(project)
    outcome = add_or_invite(project, "ivy@example.com", role="viewer", actor=actor, base_url=BASE)
    assert outcome.membership is None and outcome.invitation.email == "ivy@example.com"
    # The pending user found by e-mail (or by username, which is the address) is not added.
    with pytest.raises(Conflict, match="already invited"):
        add_or_invite(project, "ivy@example.com", role="admin", actor=actor, base_url=BASE)
    with pytest.raises(NotFound, match="To invite someone without an account, enter their e-mail"):
        add_or_invite(project, "ivy", role="viewer", actor=actor, base_url=BASE)
    with pytest.raises(InvalidInput, match="not an e-mail address"):
        add_or_invite(project, "ivy@", role="viewer", actor=actor, base_url=BASE)
    assert Invitation.objects.count() == 1 and len(mail.outbox) == 1


def test_resend_mails_a_new_link_and_renews_the_expiry(db):
    project = make_project()
    _, actor = _admin(project)
    invitation = invite_member(project, "jo@example.com", role="viewer", actor=actor, base_url=BASE)
    first_sent = invitation.sent_at
    with time_machine.travel(timezone.now() + timedelta(hours=2)):
        resent = resend_invitation(invitation, actor=actor, base_url=BASE)
    assert resent.sent_at > first_sent
    assert len(mail.outbox) == 2 and mail.outbox[1].to == ["jo@example.com"]
    _, token = _link(mail.outbox[1])
    assert invitation_for_link(invitation.public_id, token) == resent
    assert [a for a, _ in _audit(project)] == ["invitation.create", "invitation.resend"]


def test_a_refusing_mail_server_keeps_the_invitation_to_resend(db, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 2
    project = make_project()
    _, actor = _admin(project)
    with pytest.raises(InvitationNotSent, match="could not be sent"):
        invite_member(project, "kim@example.com", role="viewer", actor=actor, base_url=BASE)
    assert Invitation.objects.get().email == "kim@example.com"


# --- addmember ----------------------------------------------------------------------------------


def test_addmember_says_how_to_invite_an_unknown_address(db):
    make_project("team")
    with pytest.raises(CommandError) as refused:
        call_command("addmember", "team", "lea@example.com", "viewer", stdout=io.StringIO())
    assert "--invite" in str(refused.value) and "Members page" in str(refused.value)
    with pytest.raises(CommandError, match="give their e-mail address with --invite"):
        call_command("addmember", "team", "lea", "viewer", stdout=io.StringIO())
    assert not Invitation.objects.exists() and mail.outbox == []


@override_settings(SWITCHBOARD_PUBLIC_URL="https://sb.example.org")
def test_addmember_invite_sends_the_same_invitation(db):
    project = make_project("team")
    out = io.StringIO()
    call_command("addmember", "team", "lea@example.com", "operator", "--invite", stdout=out)
    assert "Invited lea@example.com as operator of 'team'" in out.getvalue()
    invitation = Invitation.objects.get(project=project)
    assert invitation.role == "operator" and invitation.invited_by is None
    [message] = mail.outbox
    assert message.subject == "An administrator invited you to team on Switchboard"
    assert f"https://sb.example.org/accounts/invitations/{invitation.public_id}/" in message.body
    assert _audit(project) == [("invitation.create", "cli")]
