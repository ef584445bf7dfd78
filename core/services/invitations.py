"""Inviting someone without an account: by e-mail, with a one-time link to choose a password.

An invitation (core.models.Invitation) belongs to a pending user: inactive, unusable password,
the e-mail as username. The link carries the invitation's public id and a token of Django's
password-reset machinery (default_token_generator) for that user, so it works once (choosing a
password changes what the token hashes), expires after PASSWORD_RESET_TIMEOUT, and dies when the
invitation is revoked (the row it names is gone). Accepting makes the person a member of every
project that invited them: their other links would die with the password anyway.

Changes lock the project row (as core.services.members does), write their audit row in the same
transaction, and send e-mail only after commit, through Django's e-mail API (EMAIL_BACKEND).
"""

import secrets
import smtplib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import UNUSABLE_PASSWORD_PREFIX
from django.contrib.auth.models import User
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from core.actors import Actor
from core.errors import Conflict, DomainError, InvalidInput, NotFound
from core.models import Invitation, Membership, Project, Role
from core.services.audit import record_audit
from core.services.members import _lock_project, _role, add_project_member, find_user

USERNAME_MAX = 150

# What each role may do, in the invitation's words.
ROLE_WORDS = {
    Role.VIEWER: "a viewer (reads sessions, tasks and handoffs)",
    Role.OPERATOR: "an operator (also acts on sessions and answers handoffs)",
    Role.ADMIN: "an admin (also manages members, API keys and settings)",
}


class InvitationNotSent(DomainError):
    """The invitation is saved but its e-mail could not be handed to the mail server."""

    status = 502
    code = "invitation_not_sent"


class InvitationLinkInvalid(NotFound):
    """The link names no pending invitation, or its token is wrong, used or expired."""

    code = "invitation_link_invalid"


@dataclass(frozen=True)
class AddOutcome:
    """What `add_or_invite` did: added an existing user, or invited an e-mail address."""

    membership: Membership | None = None
    invitation: Invitation | None = None


def is_pending(user: User) -> bool:
    """A user created by an invitation who has not chosen a password yet."""
    return not user.is_active and not user.has_usable_password()


def link_lifetime() -> timedelta:
    return timedelta(seconds=settings.PASSWORD_RESET_TIMEOUT)


def expires_at(invitation: Invitation) -> datetime:
    """When the link of the last e-mail stops working."""
    return invitation.sent_at + link_lifetime()


def is_expired(invitation: Invitation) -> bool:
    return expires_at(invitation) <= timezone.now()


def pending_invitations(project: Project | int) -> list[Invitation]:
    """A project's pending invitations, newest first, with who sent them."""
    return list(
        Invitation.objects.filter(project=project)
        .select_related("invited_by")
        .order_by("-sent_at", "-pk")
    )


def invitation_in(project: Project | int, public_id: UUID | str) -> Invitation:
    """A pending invitation of `project` (NotFound for any other id: nothing leaks across)."""
    invitation = (
        Invitation.objects.select_related("project", "user", "invited_by")
        .filter(project=project, public_id=public_id)
        .first()
    )
    if invitation is None:
        raise NotFound("This invitation is no longer pending: it was accepted or revoked.")
    return invitation


def clean_email(email: str) -> str:
    email = get_user_model().objects.normalize_email(email.strip())
    try:
        validate_email(email)
    except ValidationError:
        raise InvalidInput(
            f"{email!r} is not an e-mail address.", detail={"field": "email"}
        ) from None
    return email


def add_or_invite(
    project: Project, identifier: str, *, role: str, actor: Actor, base_url: str
) -> AddOutcome:
    """The console's "Add or invite": an existing user (username or e-mail) becomes a member at
    once; an e-mail address nobody has (or a pending invitee's) gets an invitation."""
    try:
        user = find_user(identifier)
    except NotFound:
        if "@" not in identifier:
            raise NotFound(
                f"No user with the username {identifier.strip()!r}. To invite someone without "
                "an account, enter their e-mail address instead.",
                detail={"user": identifier.strip()},
            ) from None
        user = None
    if user is not None and not is_pending(user):
        return AddOutcome(membership=add_project_member(project, user, role=role, actor=actor))
    email = user.email if user is not None else identifier
    return AddOutcome(
        invitation=invite_member(project, email, role=role, actor=actor, base_url=base_url)
    )


def _username_for(email: str) -> str:
    users = get_user_model().objects
    if len(email) <= USERNAME_MAX and not users.filter(username=email).exists():
        return email
    return f"{email[: USERNAME_MAX - 9]}-{secrets.token_hex(4)}"


def _pending_user(email: str) -> User:
    """The pending user of `email`, created if there is none. Conflict when an account with
    the address exists: that person is added, not invited."""
    users = get_user_model().objects
    for user in users.filter(email__iexact=email).order_by("pk"):
        if is_pending(user):
            return user
        raise Conflict(
            f"{user.get_username()} already has an account with {email!r}: add them as a "
            "member instead of inviting them.",
            detail={"email": email, "user": user.get_username()},
        )
    try:
        with transaction.atomic():  # a savepoint: another project may invite them at once
            user = users.create_user(username=_username_for(email), email=email, password=None)
    except IntegrityError:
        existing = users.filter(email__iexact=email).order_by("pk").first()
        if existing is None or not is_pending(existing):
            raise
        return existing
    user.is_active = False
    user.save(update_fields=["is_active"])
    return user


def invite_member(
    project: Project, email: str, *, role: str, actor: Actor, base_url: str
) -> Invitation:
    """Invite `email` to `project` with `role` and e-mail them the link (after commit).

    InvalidInput for a bad address or role; Conflict when they already have an account or a
    pending invitation to this project (resend it instead); InvitationNotSent when the mail
    server refuses (the invitation stays, listed, to be resent)."""
    email = clean_email(email)
    role = _role(role)
    with transaction.atomic():
        project = _lock_project(project)
        user = _pending_user(email)
        if Invitation.objects.filter(project=project, user=user).exists():
            raise Conflict(
                f"{email} is already invited to {project.name}. Resend the invitation from the "
                "list of pending invitations instead.",
                detail={"email": email},
            )
        invitation = Invitation.objects.create(
            project=project, user=user, email=email, role=role, invited_by=actor.user
        )
        record_audit(
            project,
            actor=actor,
            action="invitation.create",
            target_type="invitation",
            target_id=invitation.public_id,
            detail={"email": email, "role": str(role)},
        )
    send_invitation_email(invitation, base_url=base_url)
    return invitation


def resend_invitation(invitation: Invitation, *, actor: Actor, base_url: str) -> Invitation:
    """Send the invitation again with a fresh link (a new expiry). Earlier links keep working
    until they expire or one of them is used."""
    with transaction.atomic():
        project = _lock_project(invitation.project_id)
        current = (
            Invitation.objects.select_for_update(of=("self",))
            .select_related("project", "user", "invited_by")
            .filter(pk=invitation.pk)
            .first()
        )
        if current is None:
            raise NotFound("This invitation is no longer pending: it was accepted or revoked.")
        current.sent_at = timezone.now()
        current.save(update_fields=["sent_at"])
        record_audit(
            project,
            actor=actor,
            action="invitation.resend",
            target_type="invitation",
            target_id=current.public_id,
            detail={"email": current.email, "role": current.role},
        )
    send_invitation_email(current, base_url=base_url)
    return current


@transaction.atomic
def revoke_invitation(invitation: Invitation, *, actor: Actor) -> None:
    """Withdraw the invitation: its links stop working at once. A pending user no other
    project has invited is deleted with it. Locks the project, then the invitation row (the
    order accept_invitation keeps), so a link being used and a revocation never both win."""
    project = _lock_project(invitation.project_id)
    current = Invitation.objects.select_for_update().filter(pk=invitation.pk).first()
    if current is None:
        return  # accepted or revoked meanwhile: nothing left to withdraw
    record_audit(
        project,
        actor=actor,
        action="invitation.revoke",
        target_type="invitation",
        target_id=current.public_id,
        detail={"email": current.email, "role": current.role},
    )
    user_id = current.user_id
    current.delete()
    if not Invitation.objects.filter(user_id=user_id).exists():
        get_user_model().objects.filter(
            pk=user_id, is_active=False, password__startswith=UNUSABLE_PASSWORD_PREFIX
        ).delete()


def invitation_for_link(public_id: UUID | str, token: str) -> Invitation:
    """The pending invitation a link names, if its token is good for the invitee now.
    InvitationLinkInvalid otherwise (revoked, accepted, used, expired or mistyped)."""
    invitation = (
        Invitation.objects.select_related("project", "user", "invited_by")
        .filter(public_id=public_id)
        .first()
    )
    if (
        invitation is None
        or not is_pending(invitation.user)
        or not default_token_generator.check_token(invitation.user, token)
    ):
        raise InvitationLinkInvalid("This invitation link no longer works.")
    return invitation


def accept_invitation(invitation: Invitation, *, token: str, password: str) -> list[Membership]:
    """Set the invitee's password (validated by the caller's SetPasswordForm), activate them
    and make them a member of every project with a pending invitation for them; those
    invitations are done. InvitationLinkInvalid when the link died meanwhile.

    Locks the inviting projects (in id order), then the user, then the invitations, as a
    revocation does (project, then invitation): the token is checked again under the locks, so
    two tabs cannot both use one link, nor a revoked invitation be accepted."""
    with transaction.atomic():
        list(
            Project.objects.select_for_update(of=("self",))
            .filter(invitations__user_id=invitation.user_id)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        user = get_user_model().objects.select_for_update().filter(pk=invitation.user_id).first()
        pending = list(
            Invitation.objects.select_for_update().filter(user_id=invitation.user_id).order_by("pk")
        )
        if (
            user is None
            or invitation.pk not in {p.pk for p in pending}
            or not is_pending(user)
            or not default_token_generator.check_token(user, token)
        ):
            raise InvitationLinkInvalid("This invitation link no longer works.")
        user.set_password(password)
        user.is_active = True
        user.save(update_fields=["password", "is_active"])
        actor = Actor.for_user(user)
        memberships = []
        for each in pending:
            membership, _ = Membership.objects.get_or_create(
                project_id=each.project_id, user=user, defaults={"role": each.role}
            )
            record_audit(
                each.project_id,
                actor=actor,
                action="invitation.accept",
                target_type="membership",
                target_id=membership.pk,
                detail={
                    "email": each.email,
                    "role": membership.role,
                    "invitation": str(each.public_id),
                },
            )
            memberships.append(membership)
        Invitation.objects.filter(pk__in=[p.pk for p in pending]).delete()
    return memberships


def _inviter_name(invitation: Invitation) -> str:
    inviter = invitation.invited_by
    if inviter is None:
        return "An administrator"
    return inviter.get_full_name() or inviter.get_username()


def invitation_email(invitation: Invitation, *, base_url: str) -> dict[str, Any]:
    """Subject, plain-text body and link of the invitation's e-mail (a fresh token)."""
    token = default_token_generator.make_token(invitation.user)
    path = reverse("invitation_link", args=[invitation.public_id, token])
    link = f"{base_url.rstrip('/')}{path}"
    context = {
        "project": invitation.project.name,
        "inviter": _inviter_name(invitation),
        "role": ROLE_WORDS.get(Role(invitation.role), invitation.role),
        "link": link,
        "expires_at": expires_at(invitation),
        "lifetime_hours": settings.PASSWORD_RESET_TIMEOUT // 3600,
        "username": invitation.user.get_username(),
    }
    subject = render_to_string("registration/invitation_subject.txt", context)
    body = render_to_string("registration/invitation_email.txt", context)
    # A header holds no line break (Django refuses one); a project name never has one anyway.
    return {"subject": " ".join(subject.split()), "body": body, "link": link}


def send_invitation_email(invitation: Invitation, *, base_url: str) -> None:
    mail = invitation_email(invitation, base_url=base_url)
    try:
        send_mail(mail["subject"], mail["body"], None, [invitation.email])
    except (OSError, smtplib.SMTPException) as error:
        raise InvitationNotSent(
            f"The invitation for {invitation.email} is saved, but its e-mail could not be "
            f"sent ({error}). Check the server's e-mail settings (EMAIL_HOST), then resend it.",
            detail={"email": invitation.email},
        ) from None
