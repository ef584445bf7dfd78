"""One page of a live list (sessions, tasks), brought up to date by a flush of
core.live.LiveListConsumer: which of the rows that changed leave the page, are replaced in place,
go on top, or would land on the page and only show a notice (a refresh link instead of
reshuffling rows under the reader).

The streams of the list pages (switchboard.sessions.consumers, tasks_app.consumers) know their
own filters and queries; the page's window and what a flush does to its rows are this, once.
The `#live-rows` partial of each list template takes the frame's context (`delete`, `replace`,
`prepend`, `notice`).
"""

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.http import QueryDict
from django.template.loader import render_to_string
from django.utils import timezone

SortKey = tuple[Any, str]  # (the sort field's value, the row's id): a keyset cursor's position

# A list page's render time and the rows it shows, in its socket's URL: a change committed
# between the render and the socket's join reached no one, so the socket looks for it.
RENDERED_AT = "rendered_at"
SHOWN = "shown"
CATCH_UP_LIMIT = 200
# A write stamped just before the render's read and committed after it is looked for too; a
# row caught up that had not changed is rendered as it was.
RENDER_SLACK = timedelta(seconds=1)


def render_started() -> datetime:
    """The time a list page's socket catches up from: taken before the page's read."""
    return timezone.now() - RENDER_SLACK


def live_query(params: QueryDict, rendered_at: datetime, rows: Iterable[Any]) -> str:
    """The page's socket URL's query: its filters (`params`), its render time, its rows."""
    live = params.copy()
    live[RENDERED_AT] = rendered_at.isoformat()
    live[SHOWN] = ",".join(str(row.pk) for row in rows)
    return live.urlencode()


def _uuid_id(text: str) -> str:
    return str(uuid.UUID(text))


def rendered_page(
    params: QueryDict, row_id: Callable[[str], str] = _uuid_id
) -> tuple[datetime, set[str]] | None:
    """When the page was rendered and the ids of the rows it shows, from its socket's URL
    (None without them, or when they do not read: the socket then takes the page to show what
    the list holds now, and catches up on nothing). `row_id` reads one id, raising ValueError
    when it does not read (the lists' ids are UUIDs; the audit log's, integers)."""
    try:
        rendered_at = datetime.fromisoformat(params.get(RENDERED_AT, ""))
        shown = {row_id(i) for i in params.get(SHOWN, "").split(",") if i}
    except ValueError:
        return None
    if rendered_at.tzinfo is None or len(shown) > CATCH_UP_LIMIT:
        return None
    return rendered_at, shown


def rows_changed_since(
    rows: QuerySet[Any], since: datetime, among: set[str]
) -> tuple[list[tuple[str, bool]], set[str]]:
    """What a page of `rows` (a project's sessions or tasks: updated_at and created_at)
    rendered at `since` may not show: the rows changed since, newest first (CATCH_UP_LIMIT),
    each with whether it was created since; and which of `among` (the page's rows) are gone."""
    changed = [
        (str(pk), created_at >= since)
        for pk, created_at in rows.filter(updated_at__gte=since)
        .order_by("-updated_at")
        .values_list("pk", "created_at")[:CATCH_UP_LIMIT]
    ]
    present = {str(pk) for pk in rows.filter(pk__in=list(among)).values_list("pk", flat=True)}
    return changed, among - present


@dataclass
class RowChanges:
    """What one flush does to the shown rows."""

    delete: list[str] = field(default_factory=list)  # ids of shown rows that no longer match
    replace: list[Any] = field(default_factory=list)  # shown rows, re-rendered in place
    prepend: list[Any] = field(default_factory=list)  # rows inserted on top
    notice: bool = False  # a row would land on the page: say so, do not reshuffle

    def __bool__(self) -> bool:
        return bool(self.delete or self.replace or self.prepend or self.notice)


@dataclass
class ShownPage:
    """The rows one page shows (read once, with the view's own keyset query, at connect) and
    where the page sits in the list: `cursor_key` the cursor it was opened at (None: the first
    page), `last_key` its last row when a next page exists (None: the list ends here)."""

    known: set[str]
    last_key: SortKey | None
    cursor_key: SortKey | None
    descending: bool = True
    changed: set[str] = field(default_factory=set)  # noted since the last flush
    created: set[str] = field(default_factory=set)  # of those, new rows (created, opened)

    @property
    def first_page(self) -> bool:
        return self.cursor_key is None

    def catch_up(self, changed: list[tuple[str, bool]], gone: set[str]) -> bool:
        """Note rows_changed_since's answer as changes (created ones as new rows); whether it
        noted any (the socket then flushes on joining)."""
        for row_id, created in changed:
            if created:
                self.created.add(row_id)
            self.changed.add(row_id)
        self.changed |= gone
        return bool(changed or gone)

    def take(self) -> tuple[set[str], set[str]]:
        """The ids noted since the last flush (called on the event loop, not the thread)."""
        taken = (self.changed, self.created)
        self.changed, self.created = set(), set()
        return taken

    def in_window(self, key: SortKey) -> bool:
        """Whether a row with this sort key sorts into this page."""

        def before(a: SortKey, b: SortKey) -> bool:
            return a > b if self.descending else a < b

        if self.cursor_key is not None and not before(self.cursor_key, key):
            return False
        return self.last_key is None or not before(self.last_key, key)

    def sort_out(
        self,
        ids: Iterable[str],
        matching: dict[str, Any],
        changes: RowChanges,
        *,
        key: Callable[[Any], SortKey],
        on_top: Callable[[str], bool] = lambda row_id: False,
        to_top: bool = False,
    ) -> RowChanges:
        """Add to `changes` what happens to each of `ids` (changed rows), given `matching`: those
        of them that match the page's filters now, by id. A shown row that no longer matches
        goes; one that still does is replaced (or, `to_top`, moves to the top: a list sorted by
        last activity). A new match goes on top when `on_top(id)` (the first page of "newest
        first" and a row just created), else shows the notice if it sorts into the page."""
        for row_id in ids:
            item = matching.get(row_id)
            if row_id in self.known:
                if item is None:
                    changes.delete.append(row_id)
                    self.known.discard(row_id)
                elif to_top:
                    changes.delete.append(row_id)
                    changes.prepend.append(item)
                else:
                    changes.replace.append(item)
            elif item is not None:
                if on_top(row_id):
                    changes.prepend.append(item)
                    self.known.add(row_id)
                elif self.in_window(key(item)):
                    changes.notice = True
        return changes

    def frame(
        self,
        template: str,
        changes: RowChanges,
        *,
        key: Callable[[Any], SortKey],
        context: dict[str, Any] | None = None,
    ) -> str:
        """The `#live-rows` partial of `template` for `changes` ("" when nothing changed), rows
        put on top in the page's order."""
        if not changes:
            return ""
        changes.prepend.sort(key=key, reverse=self.descending)
        return render_to_string(
            f"{template}#live-rows",
            {
                "delete": changes.delete,
                "replace": changes.replace,
                "prepend": changes.prepend,
                "notice": changes.notice,
                **(context or {}),
            },
        )
