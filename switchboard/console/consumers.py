"""The audit log, live: ws/projects/<id>/audit/?<the page's filters and cursor>.

Thin and read-only, like every consumer (sessions/consumers.py describes the frames). Admins
only, checked at connect and again at every push (a member demoted meanwhile is disconnected).
On the first page, entries matching the filters are inserted on top as they are recorded
(`afterbegin:#audit-rows`); on an older page a notice links to the newest instead. An entry
recorded between the page's render and the socket's join reached no page: the socket catches
up on joining, from the render's time and the entries shown, both in its URL
(core.live_rows.live_query).
"""

from dataclasses import dataclass, field
from typing import Any

from django.http import QueryDict
from django.template.loader import render_to_string

from core.access import require_role
from core.errors import DomainError
from core.live import AccessLost, LiveListConsumer
from core.live_rows import RENDERED_AT, SHOWN, rendered_page
from core.models import Role
from core.queries import filter_audit
from switchboard.console.context import audit_rows
from switchboard.console.forms import AuditFilterForm

AUDIT_PAGE = "switchboard/audit_log.html"
# At most this many rows per push (a burst beyond it shows the notice instead).
LIVE_MAX_ROWS = 100
FLUSH_SECONDS = 0.3


def _entry_id(text: str) -> str:
    """An audit entry's id as the page names it (ValueError when it is not one)."""
    if not text.isascii() or not text.isdigit():
        raise ValueError(text)
    return str(int(text))


@dataclass
class AuditLogStream:
    user: Any
    project_id: int
    form: AuditFilterForm
    first_query: str
    recorded: set[str] = field(default_factory=set)
    caught_up: bool = False  # entries recorded since the page's render are noted: flush them

    @classmethod
    def open(cls, user: Any, project_id: int, query: str) -> "AuditLogStream":
        membership = require_role(user, project_id, Role.ADMIN)
        params = QueryDict(query, mutable=True)
        rendered = rendered_page(params, _entry_id)
        for name in (RENDERED_AT, SHOWN):
            params.pop(name, None)
        form = AuditFilterForm(params)
        if not form.is_valid():
            raise ValueError("invalid filters")
        params.pop("cursor", None)
        stream = cls(user=user, project_id=project_id, form=form, first_query=params.urlencode())
        if rendered is not None:
            rendered_at, shown = rendered
            missed = (
                filter_audit(membership.project, form.to_filters())
                .filter(created_at__gte=rendered_at)
                .exclude(pk__in=[int(i) for i in shown])
                .order_by("-pk")
                .values_list("pk", flat=True)[: LIVE_MAX_ROWS + 1]
            )
            stream.recorded = {str(pk) for pk in missed}
            stream.caught_up = bool(stream.recorded)
        return stream

    @property
    def first_page(self) -> bool:
        return not self.form.cleaned_data.get("cursor")

    def note(self, kind: str, entry_id: str) -> bool:
        if not entry_id.isdigit():
            return False
        self.recorded.add(entry_id)
        return True

    def take(self) -> tuple[set[str], set[str]]:
        taken = self.recorded
        self.recorded = set()
        return taken, set()

    def flush(self, ids: set[str], _created: set[str]) -> str:
        try:
            membership = require_role(self.user, self.project_id, Role.ADMIN)
        except DomainError:
            raise AccessLost from None
        project = membership.project
        matching = list(
            filter_audit(project, self.form.to_filters())
            .filter(pk__in=[int(i) for i in ids])
            .select_related("user", "api_key")
            .order_by("-pk")[: LIVE_MAX_ROWS + 1]
        )
        if not matching:
            return ""
        many = len(matching) > LIVE_MAX_ROWS
        return render_to_string(
            f"{AUDIT_PAGE}#live-rows",
            {
                "prepend": audit_rows(project, matching) if self.first_page and not many else [],
                "notice": not self.first_page or many,
                "first_query": self.first_query,
            },
        )


class AuditLogConsumer(LiveListConsumer):
    """ws/projects/<id>/audit/?<the audit log's filters and cursor>"""

    listing = "audit"
    id_field = "entry_id"
    flush_seconds = FLUSH_SECONDS

    def open_stream(self, user: Any, project_id: int, query: str) -> AuditLogStream:
        return AuditLogStream.open(user, project_id, query)

    audit_recorded = LiveListConsumer.changed
