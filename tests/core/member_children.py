"""Functions run in child processes by tests/core/test_members.py (module level, importable)."""

from core.actors import Actor
from core.errors import Conflict
from core.models import Membership


def demote(membership_id: int) -> str:
    """Make the member a viewer; "ok", or the refusal's code."""
    from core.services.members import change_member_role

    membership = Membership.objects.select_related("user").get(pk=membership_id)
    try:
        change_member_role(membership, role="viewer", actor=Actor.system("race"))
    except Conflict as exc:
        return exc.code
    return "ok"


def remove(membership_id: int) -> str:
    from core.services.members import remove_member

    membership = Membership.objects.select_related("user").get(pk=membership_id)
    try:
        remove_member(membership, actor=Actor.system("race"))
    except Conflict as exc:
        return exc.code
    return "ok"
