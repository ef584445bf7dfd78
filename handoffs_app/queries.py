"""Reads shared by the API, the dashboard pages (queue, workspace) and the consumers.

The queue: a project's active handoffs ordered by priority (highest first), then by wait
(oldest first), with the dashboard's filters (kind, status, mine, unclaimed, overdue) and a
keyset cursor on (priority, created_at, id). The agent's list: newest first, keyset on
(created_at, id) through core.cursors. Counts for the navigation in one aggregate over the
queue's partial index.
"""

import base64
import binascii
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db.models import Count, Min, Q, QuerySet
from django.utils import timezone

from core.actors import Actor
from core.cursors import decode_cursor, encode_cursor
from core.errors import InvalidInput
from core.models import Project

from .models import ACTIVE_STATUSES, Handoff, HandoffKind, HandoffStatus, Priority
from .services.validation import allowed_answers

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

MAX_LIMIT = 200


@dataclass
class QueueFilters:
    kind: list[str] | None = None
    # Default: the active statuses (open, claimed, answered, taken_over).
    status: list[str] | None = None
    mine: bool = False  # held by the viewing user
    unclaimed: bool = False  # status open
    overdue: bool = False


def _check_choices(values: list[str] | None, allowed: list[str], field: str) -> None:
    for value in values or []:
        if value not in allowed:
            raise InvalidInput(
                f"Unknown {field} {value!r}.", detail={"field": field, "allowed": allowed}
            )


def filter_queue(
    project: Project | int, filters: QueueFilters, *, user: "AbstractBaseUser | None" = None
) -> QuerySet[Handoff]:
    project_id = project.pk if isinstance(project, Project) else project
    _check_choices(filters.kind, list(HandoffKind.values), "kind")
    _check_choices(filters.status, list(HandoffStatus.values), "status")
    qs = Handoff.objects.filter(project_id=project_id)
    qs = qs.filter(status__in=filters.status or ACTIVE_STATUSES)
    if filters.kind:
        qs = qs.filter(kind__in=filters.kind)
    if filters.mine:
        qs = qs.filter(lease_holder_id=user.pk if user is not None else None)
    if filters.unclaimed:
        qs = qs.filter(status=HandoffStatus.OPEN)
    if filters.overdue:
        qs = qs.filter(overdue=True)
    return qs


def _encode_queue_cursor(handoff: Handoff) -> str:
    raw = json.dumps([handoff.priority, handoff.created_at.isoformat(), str(handoff.pk)])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_queue_cursor(cursor: str) -> tuple[int, datetime, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        priority, created, object_id = json.loads(base64.urlsafe_b64decode(padded))
        if not isinstance(priority, int) or priority not in Priority.values:
            raise ValueError
        return priority, datetime.fromisoformat(created), str(uuid.UUID(str(object_id)))
    except (ValueError, TypeError, binascii.Error, json.JSONDecodeError):
        raise InvalidInput("The cursor is not one this server issued.") from None


def queue_page(
    qs: QuerySet[Handoff], *, cursor: str | None = None, limit: int = 50
) -> tuple[list[Handoff], str | None]:
    """Priority (highest first), then wait (oldest first): keyset, no OFFSET."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}.", detail={"limit": limit})
    if cursor:
        priority, created, object_id = _decode_queue_cursor(cursor)
        qs = qs.filter(
            Q(priority__lt=priority)
            | Q(priority=priority, created_at__gt=created)
            | Q(priority=priority, created_at=created, id__gt=object_id)
        )
    page = list(
        qs.select_related("session__agent", "lease_holder").order_by(
            "-priority", "created_at", "id"
        )[: limit + 1]
    )
    next_cursor = None
    if len(page) > limit:
        page = page[:limit]
        next_cursor = _encode_queue_cursor(page[-1])
    return page, next_cursor


def list_handoffs(
    project: Project | int,
    *,
    status: list[str] | None = None,
    session_id: Any = None,
    cursor: str | None = None,
    limit: int = 50,
) -> tuple[list[Handoff], str | None]:
    """The agent's list: any status (or those given), newest first, keyset on (created, id)."""
    project_id = project.pk if isinstance(project, Project) else project
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}.", detail={"limit": limit})
    _check_choices(status, list(HandoffStatus.values), "status")
    qs = Handoff.objects.filter(project_id=project_id)
    if status:
        qs = qs.filter(status__in=status)
    if session_id is not None:
        qs = qs.filter(session_id=session_id)
    if cursor:
        created, object_id = decode_cursor(cursor, "handoffs")
        qs = qs.filter(created_at__lte=created).filter(
            Q(created_at__lt=created) | Q(id__lt=object_id)
        )
    page = list(qs.select_related("lease_holder").order_by("-created_at", "-id")[: limit + 1])
    next_cursor = None
    if len(page) > limit:
        page = page[:limit]
        next_cursor = encode_cursor(page[-1].created_at, page[-1].pk, "handoffs")
    return page, next_cursor


@dataclass
class QueueCounts:
    active: int
    open: int  # waiting for someone to claim
    claimed: int  # held (claimed, answered, taken over)
    mine: int
    overdue: int
    oldest_wait_since: datetime | None  # the oldest open handoff's request time

    def as_dict(self) -> dict[str, Any]:
        return {
            "active": self.active,
            "open": self.open,
            "claimed": self.claimed,
            "mine": self.mine,
            "overdue": self.overdue,
            "oldest_wait_since": (
                self.oldest_wait_since.isoformat() if self.oldest_wait_since else None
            ),
        }


def queue_counts(project: Project | int, *, user: "AbstractBaseUser | None" = None) -> QueueCounts:
    """Counts for the navigation and the overview: one aggregate over the active rows."""
    project_id = project.pk if isinstance(project, Project) else project
    user_id = user.pk if user is not None else None
    row = Handoff.objects.filter(project_id=project_id, status__in=ACTIVE_STATUSES).aggregate(
        active=Count("id"),
        open=Count("id", filter=Q(status=HandoffStatus.OPEN)),
        mine=Count("id", filter=Q(lease_holder_id=user_id))
        if user_id
        else Count("id", filter=Q(pk=None)),
        overdue=Count("id", filter=Q(overdue=True)),
        oldest=Min("created_at", filter=Q(status=HandoffStatus.OPEN)),
    )
    return QueueCounts(
        active=row["active"],
        open=row["open"],
        claimed=row["active"] - row["open"],
        mine=row["mine"],
        overdue=row["overdue"],
        oldest_wait_since=row["oldest"],
    )


def handoff_to_dict(handoff: Handoff, *, now: datetime | None = None) -> dict[str, Any]:
    """The API's (and the pages') view of one handoff."""
    now = now or timezone.now()
    holder = handoff.lease_holder
    return {
        "id": str(handoff.pk),
        "session_id": str(handoff.session_id),
        "kind": handoff.kind,
        "status": handoff.status,
        "reason": handoff.reason,
        "payload": handoff.payload,
        "priority": handoff.priority_name,
        "due_at": handoff.due_at.isoformat(),
        "overdue": handoff.overdue
        or (handoff.status in ("open", "claimed") and handoff.due_at < now),
        "expires_at": handoff.expires_at.isoformat(),
        "idempotency_key": handoff.idempotency_key,
        "requested_by": handoff.requested_by,
        "allowed_answers": allowed_answers(handoff.kind, handoff.payload),
        "answer": handoff.answer,
        "holder": None if holder is None else Actor.for_user(holder).label,
        "lease_expires_at": (
            handoff.lease_expires_at.isoformat() if handoff.lease_expires_at else None
        ),
        "created_at": handoff.created_at.isoformat(),
        "claimed_at": handoff.claimed_at.isoformat() if handoff.claimed_at else None,
        "answered_at": handoff.answered_at.isoformat() if handoff.answered_at else None,
        "resolved_at": handoff.resolved_at.isoformat() if handoff.resolved_at else None,
    }


def next_waiting_handoff(project: Project | int, *, after: Handoff | None = None) -> Handoff | None:
    """The handoff a person goes to next (the workspace's "n"): the first waiting (open, so
    unclaimed) handoff of the project after `after` in the queue's order (priority, then wait,
    then id), or from the top of the queue when none is after it; never `after` itself. None
    when nobody else is waiting."""
    project_id = project.pk if isinstance(project, Project) else project
    waiting = Handoff.objects.filter(project_id=project_id, status=HandoffStatus.OPEN)
    order = ("-priority", "created_at", "id")
    if after is not None:
        later = waiting.filter(
            Q(priority__lt=after.priority)
            | Q(priority=after.priority, created_at__gt=after.created_at)
            | Q(priority=after.priority, created_at=after.created_at, id__gt=after.pk)
        )
        found = later.order_by(*order).first()
        if found is not None:
            return found
        waiting = waiting.exclude(pk=after.pk)
    return waiting.order_by(*order).first()


def waiting_marks(project: Project | int, *, limit: int = 20) -> list[Handoff]:
    """The waiting (open, unclaimed) handoffs a page's browser notifications watch: the newest
    `limit` (one just asked for is among them) and the first `limit` in the queue's order (one
    just made overdue or urgent rises there), at most 2 × `limit` rows, each with its agent."""
    project_id = project.pk if isinstance(project, Project) else project
    waiting = Handoff.objects.filter(project_id=project_id, status=HandoffStatus.OPEN)
    newest = waiting.order_by("-created_at", "-id").values("pk")[:limit]
    first = waiting.order_by("-priority", "created_at", "id").values("pk")[:limit]
    # One query (each live flush runs it): the two LIMITed sets as subqueries.
    return list(
        Handoff.objects.filter(Q(pk__in=newest) | Q(pk__in=first))
        .select_related("session__agent")
        .only("id", "kind", "reason", "priority", "overdue", "created_at", "session__agent__name")
        .order_by("-priority", "created_at", "id")
    )
