"""Who is viewing a handoff's workspace now: the presence store behind "Also viewing: alice, bob".

The workspace's consumer (switchboard.handoffs.consumers) calls `mark_viewing` when its socket
opens and again every HEARTBEAT_SECONDS while it stays open, `stop_viewing` when it closes, and
`viewers_of` to render the line; it tells the handoff's other open pages through the channel
layer group `presence_group(handoff)` (not the handoff's own group, which wakes the agents'
long-polls). A page whose heartbeat stopped (its server process died without closing its
sockets) counts for no one after VIEWER_TTL; `sweep` deletes such rows later.

Presence is not domain state (nothing is audited, nothing reaches the agent): these functions
are the store, called by the consumer only.
"""

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from .models import HandoffViewer

# The consumer renews its row this often; a row unrenewed for VIEWER_TTL counts for no one
# (three heartbeats missed: a slow beat under load is not a departure).
HEARTBEAT_SECONDS = 5.0
VIEWER_TTL = timedelta(seconds=15)
# Rows whose heartbeat stopped this long ago are deleted when a page opens (sweep).
STALE_AFTER = timedelta(minutes=5)


def presence_group(handoff_id: object) -> str:
    """The channel layer group of the pages viewing one handoff."""
    return f"handoff-{handoff_id}-viewers"


def mark_viewing(
    handoff_id: object, user: Any, channel_name: str, *, now: datetime | None = None
) -> None:
    """Record (or renew) that the page behind `channel_name` shows the handoff to `user`."""
    HandoffViewer.objects.update_or_create(
        channel_name=channel_name,
        defaults={"handoff_id": handoff_id, "user_id": user.pk, "seen_at": now or timezone.now()},
    )


def stop_viewing(channel_name: str) -> None:
    HandoffViewer.objects.filter(channel_name=channel_name).delete()


def viewers_of(
    handoff_id: object,
    project_id: int,
    *,
    exclude_user: Any = None,
    now: datetime | None = None,
) -> list[str]:
    """The user names viewing the handoff now (seen within VIEWER_TTL), each once however many
    tabs they have open, sorted; only people who can still see it (a member of its project, or
    a superuser, as handoffs_app.access allows); `exclude_user` (the page's own user) left out."""
    since = (now or timezone.now()) - VIEWER_TTL
    rows = HandoffViewer.objects.filter(handoff_id=handoff_id, seen_at__gte=since).filter(
        Q(user__memberships__project_id=project_id) | Q(user__is_superuser=True),
        user__is_active=True,
    )
    if exclude_user is not None:
        rows = rows.exclude(user_id=exclude_user.pk)
    names = rows.values_list("user__username", flat=True).distinct()
    return sorted(set(names), key=str.casefold)


def sweep(*, now: datetime | None = None) -> int:
    """Delete the rows of pages whose heartbeat stopped long ago; how many went."""
    before = (now or timezone.now()) - STALE_AFTER
    deleted, _ = HandoffViewer.objects.filter(seen_at__lt=before).delete()
    return deleted
