"""Project members: adding a person by username or e-mail, changing a role, removing one.

Every change takes the project row's lock first, so "not the last admin" holds under concurrent
changes (two admins demoting each other at once: one of them wins, the other is refused), and
writes an audit row in the same transaction.
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction

from core.actors import Actor
from core.errors import Conflict, InvalidInput, NotFound
from core.models import Membership, Project, Role
from core.services.audit import record_audit
from core.text import text_problem


class LastAdmin(Conflict):
    code = "last_admin"


def find_user(identifier: str) -> User:
    """The user whose username is `identifier`, else whose e-mail is (case-insensitive).

    NotFound when nobody matches (callers say how to invite them: core.services.invitations);
    InvalidInput when an e-mail belongs to several accounts."""
    identifier = identifier.strip()
    if not identifier or text_problem(identifier):
        raise InvalidInput("Give the username or e-mail address of an existing user.")
    users = get_user_model().objects
    user = users.filter(username=identifier).first()
    if user is not None:
        return user
    if "@" in identifier:
        matches = list(users.filter(email__iexact=identifier)[:2])
        if len(matches) > 1:
            raise InvalidInput(
                f"Several users have the e-mail {identifier!r}; add them by username."
            )
        if matches:
            return matches[0]
    raise NotFound(
        f"No user with the username or e-mail {identifier!r}.",
        detail={"user": identifier},
    )


def _role(role: str) -> Role:
    if role not in Role.values:
        raise InvalidInput(
            f"Unknown role {role!r}; use one of: {', '.join(Role.values)}.",
            detail={"field": "role", "allowed": Role.values},
        )
    return Role(role)


def _lock_project(project: Project | int) -> Project:
    project_id = project.pk if isinstance(project, Project) else project
    return Project.objects.select_for_update().get(pk=project_id)


def _admins(project: Project | int) -> int:
    return Membership.objects.filter(project=project, role=Role.ADMIN).count()


def leaves_no_admin(membership: Membership, *, new_role: str | None = None) -> bool:
    """Whether removing the member (or giving them `new_role`) would leave no admin. A read
    for forms; the services check it again under the project lock."""
    if membership.pk is None or new_role == Role.ADMIN:
        return False
    stored = Membership.objects.filter(pk=membership.pk).values_list("role", flat=True).first()
    return stored == Role.ADMIN and _admins(membership.project_id) <= 1


@transaction.atomic
def add_project_member(project: Project, user: User, *, role: str, actor: Actor) -> Membership:
    """Make `user` a member of `project` with `role`. Conflict if they already are one."""
    role = _role(role)
    project = _lock_project(project)
    existing = Membership.objects.filter(project=project, user=user).first()
    if existing is not None:
        raise Conflict(
            f"{user.get_username()} is already a member of {project.name} ({existing.role}). "
            "Change their role in the list instead.",
            detail={"user": user.get_username(), "role": existing.role},
        )
    membership = Membership.objects.create(project=project, user=user, role=role)
    record_audit(
        project,
        actor=actor,
        action="member.add",
        target_type="membership",
        target_id=membership.pk,
        detail={"user": user.get_username(), "role": str(role)},
    )
    return membership


@transaction.atomic
def change_member_role(membership: Membership, *, role: str, actor: Actor) -> Membership:
    """Give the member another role; refused (LastAdmin) if it would leave no admin."""
    role = _role(role)
    project = _lock_project(membership.project_id)
    current = Membership.objects.select_related("user").get(pk=membership.pk)
    if current.role == role:
        return current
    if current.role == Role.ADMIN and _admins(project) <= 1:
        raise LastAdmin(
            f"{current.user.get_username()} is the last admin of {project.name}. "
            "Make someone else an admin first.",
            detail={"user": current.user.get_username()},
        )
    old = current.role
    current.role = role
    current.save(update_fields=["role"])
    record_audit(
        project,
        actor=actor,
        action="member.role",
        target_type="membership",
        target_id=current.pk,
        detail={"user": current.user.get_username(), "from": old, "to": str(role)},
    )
    membership.role = role
    return current


@transaction.atomic
def remove_member(membership: Membership, *, actor: Actor) -> None:
    """Remove the member from the project; refused (LastAdmin) for the last admin."""
    project = _lock_project(membership.project_id)
    current = Membership.objects.select_related("user").filter(pk=membership.pk).first()
    if current is None:
        return  # removed meanwhile: the outcome asked for
    if current.role == Role.ADMIN and _admins(project) <= 1:
        raise LastAdmin(
            f"{current.user.get_username()} is the last admin of {project.name} and cannot be "
            "removed. Make someone else an admin first.",
            detail={"user": current.user.get_username()},
        )
    record_audit(
        project,
        actor=actor,
        action="member.remove",
        target_type="membership",
        target_id=current.pk,
        detail={"user": current.user.get_username(), "role": current.role},
    )
    current.delete()
