"""The retention page, live: ws/projects/<id>/retention/. Runs starting and finishing,
compactions, deletions and holds re-render the runs (with the chart) and the holds sections
(out-of-band swaps). Members only, checked at connect and at every push."""

from dataclasses import dataclass
from typing import Any

from django.template.loader import render_to_string

from core.access import require_role
from core.errors import DomainError
from core.live import AccessLost, LiveListConsumer
from core.models import Role
from retention_app.domain_events import RETENTION_LISTING
from switchboard.retention.views import TEMPLATE, live_context


@dataclass
class RetentionStream:
    user: Any
    project_id: int
    dirty: bool = False

    def note(self, kind: str, _id: str) -> bool:
        self.dirty = True
        return True

    def take(self) -> tuple[set[str], set[str]]:
        self.dirty = False
        return set(), set()

    def flush(self, _changed: set[str], _created: set[str]) -> str:
        try:
            membership = require_role(self.user, self.project_id)
        except DomainError:
            raise AccessLost from None
        context = {
            "project": membership.project,
            "is_admin": membership.has_role(Role.ADMIN),
            "oob": True,
            **live_context(self.project_id),
        }
        return "".join(
            render_to_string(f"{TEMPLATE}#{name}", context) for name in ("live-runs", "live-holds")
        )


class RetentionConsumer(LiveListConsumer):
    listing = RETENTION_LISTING
    id_field = "id"
    flush_seconds = 0.5

    def open_stream(self, user: Any, project_id: int, query: str) -> RetentionStream:
        require_role(user, project_id)
        return RetentionStream(user=user, project_id=project_id)

    retention_changed = LiveListConsumer.changed
    session_compacted = LiveListConsumer.changed
    session_deleted = LiveListConsumer.changed
    session_hold = LiveListConsumer.changed
