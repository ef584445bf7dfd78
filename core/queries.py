"""Reads of the core app shared by pages and consumers: a project's audit trail, filtered and
keyset-paginated (newest first, on the id: the `audit_project_id` index)."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet

from core.models import ApiKey, AuditEntry, Membership, Project


@dataclass(frozen=True)
class AuditFilters:
    actor: str = ""
    action: str = ""
    target_type: str = ""
    after: datetime | None = None  # created at or after
    before: datetime | None = None  # created before


def filter_audit(project: Project, filters: AuditFilters) -> QuerySet[AuditEntry]:
    qs = AuditEntry.objects.filter(project=project)
    if filters.actor:
        qs = qs.filter(actor=filters.actor)
    if filters.action:
        qs = qs.filter(action=filters.action)
    if filters.target_type:
        qs = qs.filter(target_type=filters.target_type)
    if filters.after is not None:
        qs = qs.filter(created_at__gte=filters.after)
    if filters.before is not None:
        qs = qs.filter(created_at__lt=filters.before)
    return qs


def page_audit(
    qs: QuerySet[AuditEntry], *, before_id: int | None, limit: int
) -> tuple[list[AuditEntry], int | None]:
    """One page newest first, starting below `before_id`; and the id to continue below (None
    on the last page). Ids grow with every row written, so the order is stable under inserts."""
    if before_id is not None:
        qs = qs.filter(pk__lt=before_id)
    rows = list(qs.select_related("user", "api_key").order_by("-pk")[: limit + 1])
    if len(rows) > limit:
        return rows[:limit], rows[limit - 1].pk
    return rows, None


def project_members(project: Project) -> list[Membership]:
    """The project's members, admins first, then by username."""
    order = {"admin": 0, "operator": 1, "viewer": 2}
    members = list(Membership.objects.filter(project=project).select_related("user"))
    members.sort(key=lambda m: (order.get(m.role, 9), m.user.get_username().lower()))
    return members


def project_api_keys(project: Project) -> list[ApiKey]:
    """The project's keys, active first, newest first (revoked ones stay listed)."""
    keys = list(ApiKey.objects.filter(project=project).select_related("created_by").order_by("-pk"))
    keys.sort(key=lambda k: not k.is_active)
    return keys
