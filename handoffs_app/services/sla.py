"""A project's handoff SLA and lease settings, changed by its admins."""

from typing import TYPE_CHECKING

from django.db import transaction

from core.access import require_role
from core.actors import Actor
from core.errors import InvalidInput
from core.models import Role
from core.services.audit import record_audit

from ..models import HandoffSettings
from .records import sla_for

if TYPE_CHECKING:
    from django.contrib.auth.models import User

FIELDS = (
    "question_due_seconds",
    "approval_due_seconds",
    "takeover_due_seconds",
    "budget_due_seconds",
    "expire_after_overdue_seconds",
    "lease_seconds",
)
LIMITS = {"lease_seconds": (60, 24 * 3600)}
DEFAULT_LIMITS = (60, 90 * 24 * 3600)


def update_handoff_settings(project_id: int, *, user: "User", **values: int) -> HandoffSettings:
    """Set some of FIELDS (seconds) for the project; admins only. Changes apply to handoffs
    requested (due and expiry) or claimed (lease) afterwards. Audited."""
    require_role(user, project_id, Role.ADMIN)
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise InvalidInput("Unknown handoff settings.", detail={"unknown": unknown})
    for name, value in values.items():
        low, high = LIMITS.get(name, DEFAULT_LIMITS)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise InvalidInput(
                f"{name} is a number of seconds from {low} to {high}.",
                detail={"field": name, "min": low, "max": high},
            )

    with transaction.atomic():
        current = sla_for(project_id)
        before = {name: getattr(current, name) for name in FIELDS}
        settings, _ = HandoffSettings.objects.select_for_update().get_or_create(
            project_id=project_id, defaults=before
        )
        for name, value in values.items():
            setattr(settings, name, value)
        settings.save()
        record_audit(
            project_id,
            actor=Actor.for_user(user),
            action="handoff.settings",
            target_type="project",
            target_id=project_id,
            detail={"before": before, "after": {name: getattr(settings, name) for name in FIELDS}},
        )
    return settings
