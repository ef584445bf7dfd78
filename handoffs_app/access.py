"""Handoff look-ups scoped to the caller's project (invariant 8): another project's handoff is
a 404, exactly like one that does not exist. Used by the API, the dashboard and the consumers."""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from core.access import as_uuid, member_rows, require_role
from core.errors import NotFound
from core.models import ApiKey, Membership, Role

from .models import Handoff


def _not_found(handoff_id: Any) -> NotFound:
    return NotFound("Handoff not found.", detail={"handoff_id": str(handoff_id)})


def get_handoff_for_key(api_key: ApiKey, handoff_id: Any) -> Handoff:
    handoff = (
        Handoff.objects.select_related("lease_holder")
        .filter(pk=as_uuid(handoff_id, "Handoff"), project_id=api_key.project_id)
        .first()
    )
    if handoff is None:
        raise _not_found(handoff_id)
    return handoff


def get_handoff_for_user(
    user: AbstractBaseUser | AnonymousUser, handoff_id: Any, minimum: str = Role.VIEWER
) -> tuple[Handoff, Membership]:
    """The handoff and the user's membership; 404 for non-members, 403 below `minimum`."""
    # The shared membership filter: a superuser sees every project's handoffs, as the queue does.
    handoff = member_rows(
        Handoff.objects.select_related("session__agent", "lease_holder", "project").filter(
            pk=as_uuid(handoff_id, "Handoff")
        ),
        user,
    ).first()
    if handoff is None:
        raise _not_found(handoff_id)
    return handoff, require_role(user, handoff.project_id, minimum)
