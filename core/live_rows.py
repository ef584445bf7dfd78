"""One page of a live list (sessions, tasks), brought up to date by a flush of
core.live.LiveListConsumer: which of the rows that changed leave the page, are replaced in place,
go on top, or would land on the page and only show a notice (a refresh link instead of
reshuffling rows under the reader).

The streams of the list pages (switchboard.sessions.consumers, tasks_app.consumers) know their
own filters and queries; the page's window and what a flush does to its rows are this, once.
The `#live-rows` partial of each list template takes the frame's context (`delete`, `replace`,
`prepend`, `notice`).
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.template.loader import render_to_string

SortKey = tuple[Any, str]  # (the sort field's value, the row's id): a keyset cursor's position


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
