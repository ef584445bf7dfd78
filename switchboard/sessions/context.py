"""The data the sessions pages and their partials render (the shell itself is core.pages).

Views and consumers build their template context here, so the first render, the htmx swap and
the websocket push of a partial get the same data. Nothing here builds HTML: these functions
return plain values and the templates (autoescaped) turn them into markup.
"""

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.template.defaultfilters import filesizeformat

from core.errors import NotFound, StoredValueTooDeep
from core.models import Membership
from core.pages import role_context
from core.text import loads_stored
from handoffs_app.models import Handoff, HandoffStatus
from retention_app.services.holds import session_hold
from sessions_app.http import INLINE_IMAGE_TYPES
from sessions_app.models import Artifact, EventKind, Session, SessionStatus, Tier
from sessions_app.queries import (
    SessionAt,
    lifecycle_changes,
    session_at,
    slice_events,
)
from sessions_app.services.artifacts import list_artifacts, open_artifact
from sessions_app.services.state import FoldedState, state_or_unreadable
from tasks_app.queries import TaskAsOf, tasks_as_of, tasks_for_session

logger = logging.getLogger(__name__)

EVENTS_PER_PAGE = 50


# --- Session page ---------------------------------------------------------------------------


@dataclass
class BudgetBar:
    label: str
    used: Any
    limit: Any
    percent: int
    level: str  # "" | "near" | "over"


def budget_bars(session: Session) -> list[BudgetBar]:
    return usage_bars(
        session.tokens_used, session.cost_used, session.budget_max_tokens, session.budget_max_cost
    )


def usage_bars(
    tokens_used: int, cost_used: Any, max_tokens: int | None, max_cost: Any
) -> list[BudgetBar]:
    """One bar per budget limit set: how much of it `tokens_used` / `cost_used` spend."""
    bars = []
    for label, used, limit in (
        ("Tokens", tokens_used, max_tokens),
        ("Cost", cost_used, max_cost),
    ):
        if limit is None:
            continue
        ratio = Decimal(used) / Decimal(limit) if limit else Decimal(1 if used else 0)
        level = "over" if used > limit else "near" if ratio >= Decimal("0.8") else ""
        bars.append(BudgetBar(label, used, limit, min(int(ratio * 100), 100), level))
    return bars


@dataclass
class BudgetUse:
    """The sessions list's budget cell: the limit closest to (or furthest past) its end."""

    percent: int  # the bar's fill, 0-100
    used_percent: int  # as said in words; past 100 once exceeded
    level: str  # "" | "near" | "over", as BudgetBar
    description: str  # every limit in words, for the cell's title


def budget_use(session: Session) -> BudgetUse | None:
    """None for a session without a budget. From the row alone (no query)."""
    bars = budget_bars(session)
    if not bars:
        return None

    def used_ratio(bar: BudgetBar) -> Decimal:
        if bar.limit:
            return Decimal(bar.used) / Decimal(bar.limit)
        return Decimal(1 if bar.used else 0)

    worst = max(bars, key=lambda bar: (bar.level == "over", used_ratio(bar)))
    return BudgetUse(
        percent=worst.percent,
        used_percent=int(used_ratio(worst) * 100),
        level=worst.level,
        description="; ".join(
            f"{bar.label}: {_amount(bar.used)} of {_amount(bar.limit)}"
            f"{' (exceeded)' if bar.level == 'over' else ''}"
            for bar in bars
        ),
    )


def _amount(value: Any) -> str:
    """Tokens as a whole number, a cost to the cent: "12,000", "4.25"."""
    return f"{value:,.2f}" if isinstance(value, Decimal) else f"{value:,}"


MAX_FORKS_SHOWN = 20


@dataclass
class Moment:
    """The seq the session page is pinned to (time travel, `?at=`), and the session as it was
    there: the header's status, usage and budget then (sessions_app.queries.session_at)."""

    then: SessionAt
    budget: list[BudgetBar]

    @property
    def seq(self) -> int:
        return self.then.seq

    @property
    def time(self) -> datetime:
        return self.then.time

    @property
    def status_label(self) -> str:
        try:
            return str(SessionStatus(self.then.status).label)
        except ValueError:
            return self.then.status


def moment_at(session: Session, seq: int) -> Moment:
    """The session page's moment at `seq`. Raises InvalidInput outside 0…head and Compacted
    strictly inside a compacted range (sessions_app.queries.session_at)."""
    then = session_at(session, seq)
    return Moment(
        then=then,
        budget=usage_bars(
            then.tokens_used, then.cost_used, then.budget_max_tokens, then.budget_max_cost
        ),
    )


def session_header_context(
    session: Session, membership: Membership, moment: Moment | None = None
) -> dict[str, Any]:
    """The header partial: status, agent, budget, lineage and the actions of this role.

    With a `moment` the status, usage and budget are those at its seq (the actions stay the
    live session's: they act on it now)."""
    forks = list(
        session.forks.order_by("created_at", "id").only(
            "id", "title", "status", "fork_seq", "created_at", "parent_id"
        )[: MAX_FORKS_SHOWN + 1]
    )
    return {
        "session": session,
        "budget": moment.budget if moment else budget_bars(session),
        "moment": moment,
        "forks": forks[:MAX_FORKS_SHOWN],
        "more_forks": len(forks) > MAX_FORKS_SHOWN,
        "can_pause": session.can_transition(SessionStatus.PAUSED),
        "can_resume": session.can_transition(SessionStatus.RESUMED),
        "can_close": session.can_transition(SessionStatus.CLOSED),
        "active_handoff": active_handoff(session),
        "legal_hold": session_hold(session),
        **role_context(membership),
    }


@dataclass
class TimelineItem:
    seq: int
    from_status: str
    to_status: str
    reason: str
    actor: str
    created_at: datetime
    handoff_text: str = ""  # a handoff step in words ("approval: claimed by alice")
    handoff_id: str = ""


def timeline(session: Session, *, upto_seq: int | None = None) -> list[TimelineItem]:
    """The session's own lifecycle changes and handoff steps, oldest first (the last 50 of
    each, merged by seq); with `upto_seq`, those up to that seq (time travel)."""
    items = [
        TimelineItem(
            seq=event.seq,
            from_status=str(event.content.get("from", "")),
            to_status=str(event.content.get("to", "")),
            reason=str(event.content.get("reason", "")),
            actor=str(event.content.get("actor", "") or event.actor),
            created_at=event.created_at,
        )
        for event in lifecycle_changes(session, upto_seq=upto_seq)
    ]
    items += [
        TimelineItem(
            seq=record.seq,
            from_status="",
            to_status="",
            reason="",
            actor="",
            created_at=record.created_at,
            handoff_text=record.text,
            handoff_id=record.handoff_id,
        )
        for record in handoff_records(session, upto_seq=upto_seq)
    ]
    items.sort(key=lambda item: item.seq)
    return items


# --- Log records ------------------------------------------------------------------------------


STEP_WORDS = {
    "requested": "asked for a person",
    "claimed": "claimed by {actor}",
    "released": "released by {actor}",
    "lease_expired": "lease of {previous_holder} expired; back in the queue",
    "reassigned": "reassigned to {holder} by {actor}",
    "answered": "answered by {actor}",
    "taken_over": "taken over by {actor}",
    "handed_back": "handed back by {actor}",
    "closed": "closed by {actor}",
    "cancelled": "cancelled by {actor}",
    "expired": "expired unanswered",
    "overdue": "overdue",
    "ignored": "ignored by {actor}: the agent goes on without the action",
}
ANSWER_WORDS = {
    "respond": "answered",
    "accept": "approved",
    "edit": "approved with edited arguments",
    "reject": "rejected",
    "ignore": "ignored",
    "budget": "budget raised",
}


def who(label: Any) -> str:
    """An actor label as people read it: "user:alice" is alice; keys and systems stay as
    they are ("key:4f2a…", "system:sla")."""
    text = str(label)
    return text.removeprefix("user:")


def handoff_step_text(content: Any) -> str:
    """A `handoff` log record in words: "approval: claimed by alice", "question: answered"."""
    if not isinstance(content, dict):
        return "handoff record"
    step = str(content.get("step", ""))
    words = STEP_WORDS.get(step, step.replace("_", " ") or "handoff record")
    fields = {k: who(v) for k, v in content.items() if isinstance(v, (str, int))}
    fields.setdefault("actor", "?")
    fields.setdefault("previous_holder", "its holder")
    fields.setdefault("holder", "?")
    try:
        text = words.format(**fields)
    except (KeyError, IndexError, ValueError):
        text = words
    if step == "answered" and isinstance(content.get("answer"), dict):
        kind = ANSWER_WORDS.get(str(content["answer"].get("type", "")))
        if kind:
            text = f"{kind} by {who(content.get('actor', '?'))}"
    if step == "requested" and content.get("reason"):
        text = f"{text}: {content['reason']}"
    kind = content.get("kind")
    return f"{kind}: {text}" if kind else text


@dataclass
class HandoffRecord:
    seq: int
    text: str
    handoff_id: str
    created_at: datetime


def handoff_records(
    session: Session,
    *,
    handoff_id: str | None = None,
    limit: int = 50,
    upto_seq: int | None = None,
) -> list[HandoffRecord]:
    """The session's `handoff` log records (up to `upto_seq`), oldest first (the last
    `limit`), read through the partial index on durable events."""
    page = slice_events(
        session,
        kinds=[EventKind.HANDOFF],
        limit=limit,
        newest_first=True,
        before_seq=None if upto_seq is None else upto_seq + 1,
    )
    records = []
    for row in reversed(page.rows):
        content, _ = stored_content(row)
        if handoff_id and isinstance(content, dict) and content.get("handoff_id") != handoff_id:
            continue
        records.append(
            HandoffRecord(
                seq=row["seq"],
                text=handoff_step_text(content),
                handoff_id=str(content.get("handoff_id", "")) if isinstance(content, dict) else "",
                created_at=row["created_at"],
            )
        )
    return records


def active_handoff(session: Session) -> Handoff | None:
    """The session's active handoff, if any (the one-active-per-session partial index)."""
    return (
        Handoff.objects.filter(
            session_id=session.pk,
            status__in=[
                HandoffStatus.OPEN,
                HandoffStatus.CLAIMED,
                HandoffStatus.ANSWERED,
                HandoffStatus.TAKEN_OVER,
            ],
        )
        .select_related("lease_holder")
        .first()
    )


TEXT_PREVIEW_CHARS = 400
TEXT_PREVIEW_LINES = 8
JSON_OPEN_LINES = 12


@dataclass
class EventView:
    """One log row as the template shows it. `pretty` is indented JSON text (autoescaped)."""

    seq: int
    kind: str
    tier: str
    role: str
    actor: str
    tokens: int
    cost: Decimal
    created_at: datetime
    summary: str
    text: str
    text_preview: str
    text_truncated: bool
    pretty: str
    pretty_lines: int
    json_open: bool
    is_durable: bool
    # A fork point shown just above this row (event_log): the lineage changes hands here.
    boundary: "ForkBoundary | None" = None
    # Time travel (event_log with `at`): the row came after the moment shown (greyed), or is it.
    later: bool = False
    is_moment: bool = False


@dataclass
class ForkBoundary:
    """Where a fork's log passes from an ancestor's events (seq <= `seq`) to its own."""

    seq: int
    parent_id: str
    parent_title: str
    child_id: str
    child_title: str
    child_is_session: bool


def _compact(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _event_summary(kind: str, content: Any) -> tuple[str, str]:
    """(one-line summary, long text or "") for a row, from its decoded content."""
    if not isinstance(content, dict):
        return _compact(content), ""
    text = content.get("text") if isinstance(content.get("text"), str) else ""
    if not text and isinstance(content.get("message"), str):
        text = content["message"]
    if kind == "tool_call":
        name = _compact(content.get("name", "?"), 60)
        return f"{name}({_compact(content.get('arguments', {}))})", ""
    if kind == "tool_result":
        summary = _compact(content.get("name", "?"), 60)
        if content.get("error"):
            return f"{summary} failed: {_compact(content['error'])}", ""
        return f"{summary} → {_compact(content.get('result'))}", ""
    if kind == "fact":
        return f"{_compact(content.get('key', '?'), 60)} = {_compact(content.get('value'))}", ""
    if kind == "decision":
        decision = _compact(content.get("decision", ""), 80)
        rationale = content.get("rationale")
        return (f"{decision} — {_compact(rationale)}" if rationale else decision), ""
    if kind == "lifecycle":
        reason = content.get("reason")
        move = f"{content.get('from', '?')} → {content.get('to', '?')}"
        return (f"{move}: {_compact(reason)}" if reason else move), ""
    if kind == "state":
        keys = ", ".join(str(k) for k in list(content)[:6])
        return f"state patch: {keys}" if keys else "state patch (empty)", ""
    if kind == "handoff":
        return _compact(handoff_step_text(content), 200), ""
    if kind == "artifact":
        name = _compact(content.get("name", "?"), 80)
        if content.get("action") == "delete":
            versions = ", ".join(f"v{v}" for v in content.get("versions") or [])
            return f"deleted {name} {versions}", ""
        size = filesizeformat(content.get("size") or 0)
        return f"saved {name} v{content.get('version', '?')} ({size})", ""
    return "", text


def stored_content(row: dict[str, Any]) -> tuple[Any, str]:
    """(content, "") of a log row, or ({}, why) when it was stored nested deeper than the page
    can show (before nesting was bounded): that row says so, the rest of the log is shown."""
    if not row.get("content_json"):
        return {}, ""
    try:
        return loads_stored(row["content_json"], what=f"The event at seq {row['seq']}"), ""
    except StoredValueTooDeep as refused:
        return {}, refused.message


def event_view(row: dict[str, Any]) -> EventView:
    content, unreadable = stored_content(row)
    summary, text = _event_summary(row["kind"], content)
    if unreadable:
        summary, text = unreadable, ""
    lines = text.splitlines()
    truncated = len(text) > TEXT_PREVIEW_CHARS or len(lines) > TEXT_PREVIEW_LINES
    preview = text
    if truncated:
        preview = "\n".join(lines[:TEXT_PREVIEW_LINES])[:TEXT_PREVIEW_CHARS].rstrip() + "…"
    # Pretty-printed here, escaped by the template: never marked safe.
    pretty = unreadable or json.dumps(content, indent=2, ensure_ascii=False, sort_keys=False)
    pretty_lines = pretty.count("\n") + 1
    return EventView(
        seq=row["seq"],
        kind=row["kind"],
        tier=row["tier"],
        role=row["role"],
        actor=row["actor"],
        tokens=row["tokens"],
        cost=row["cost"],
        created_at=row["created_at"],
        summary=summary,
        text=text,
        text_preview=preview,
        text_truncated=truncated,
        pretty=pretty,
        pretty_lines=pretty_lines,
        # A row with a text or a summary line already says what it holds: its JSON starts
        # folded. Anything else shows short JSON open.
        json_open=not text and not summary and pretty_lines <= JSON_OPEN_LINES,
        is_durable=row["tier"] == Tier.DURABLE,
    )


@dataclass
class LogOptions:
    """How the event log is sliced: order, filters and where it starts (from the GET form)."""

    order: str = "desc"
    kinds: list[str] = field(default_factory=list)
    tier: str = ""
    seq: int | None = None  # jump target
    after_seq: int | None = None  # cursor (oldest first)
    before_seq: int | None = None  # cursor (newest first)
    until: int | None = None  # oldest first: the head when the page was rendered
    at: int | None = None  # time travel: the seq shown as "now"; later rows are greyed

    @classmethod
    def from_cleaned(cls, data: dict[str, Any], *, at: int | None = None) -> "LogOptions":
        return cls(
            at=at,
            order=data.get("order") or "desc",
            kinds=list(data.get("kind") or []),
            tier=data.get("tier") or "",
            seq=data.get("seq"),
            after_seq=data.get("after_seq"),
            before_seq=data.get("before_seq"),
            until=data.get("until"),
        )

    def filter_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"order": self.order}
        if self.at is not None:
            params["at"] = self.at
        if self.kinds:
            params["kind"] = self.kinds
        if self.tier:
            params["tier"] = self.tier
        return params


@dataclass
class EventLog:
    events: list[EventView]
    options: LogOptions
    head: int
    has_more: bool
    more_query: str  # the query string of the next slice ("load more")
    live: bool  # new events are inserted as they arrive (websocket)
    ws_query: str
    newer_query: str  # newest first after a jump: the slice above this one
    filter_query: str


# Time travel: how many rows after (newest first) or before (oldest first) the moment the
# log shows around it, so the reader sees where the moment sits.
MOMENT_CONTEXT_ROWS = 10


def event_log(session: Session, options: LogOptions) -> EventLog:
    """One positional slice of the log, in the requested order, plus the links around it.

    Bounded at the head read with the session, so a row appended meanwhile arrives once, by
    the websocket (which resumes after `head`), never twice. With `options.at` (time travel)
    the slice starts a few rows around that seq, rows after it are marked `later`, and nothing
    arrives live (the page shows a past moment).
    """
    at = options.at
    head = session.head_seq
    kinds = options.kinds or None
    tier = options.tier or None
    newer_query = ""
    if options.order == "asc":
        until = min(options.until if options.until is not None else head, head)
        after = options.after_seq
        if after is None and options.seq:
            after = options.seq - 1
        elif after is None:
            after = 0 if at is None else max(at - MOMENT_CONTEXT_ROWS, 0)
        page = slice_events(
            session,
            after_seq=after,
            before_seq=until + 1,
            limit=EVENTS_PER_PAGE,
            kinds=kinds,
            tier=tier,
        )
        last = page.rows[-1]["seq"] if page.rows else after
        more = {**options.filter_params(), "after_seq": last, "until": until}
        # Oldest first, the live edge is the end: new rows go after the frozen `until`.
        live = at is None
    else:
        before = options.before_seq
        top = head if at is None else min(head, at + MOMENT_CONTEXT_ROWS)
        if before is None:
            before = options.seq + 1 if options.seq else top + 1
        before = min(before, head + 1)
        page = slice_events(
            session,
            before_seq=before,
            limit=EVENTS_PER_PAGE,
            kinds=kinds,
            tier=tier,
            newest_first=True,
        )
        last = page.rows[-1]["seq"] if page.rows else before
        more = {**options.filter_params(), "before_seq": last}
        # Newest first, rows arrive on top only when the top is the head.
        live = options.seq is None and options.before_seq is None and at is None
        shown_top = options.seq if options.seq is not None else top
        if shown_top < head and options.before_seq is None:
            newer_query = urlencode(
                {**options.filter_params(), "seq": min(head, shown_top + EVENTS_PER_PAGE)},
                doseq=True,
            )
    ws_params = {**options.filter_params(), "after_seq": head, "rows": int(live)}
    events = [event_view(row) for row in page.rows]
    if at is not None:
        for event in events:
            event.later = event.seq > at
            event.is_moment = event.seq == at
    # The row shown just before this slice's first: the cursor's (or past the head: this one).
    shown_before = after if options.order == "asc" else before
    mark_fork_boundaries(session, events, shown_before=shown_before)
    return EventLog(
        events=events,
        options=options,
        head=head,
        has_more=page.has_more,
        more_query=urlencode(more, doseq=True),
        live=live,
        ws_query=urlencode(ws_params, doseq=True),
        newer_query=newer_query,
        filter_query=urlencode(options.filter_params(), doseq=True),
    )


def mark_fork_boundaries(session: Session, events: list[EventView], *, shown_before: int) -> None:
    """Set `boundary` on each row of a fork's log where, in display order, the events pass
    from one session of the lineage to another (the parent's last event, the fork's first).

    `shown_before` is the seq of the row displayed just before `events[0]` (a cursor; past the
    head for the newest first page), so a boundary between two slices is marked too.
    """
    segments = session.lineage_segments()
    if len(segments) < 2 or not events:
        return

    def owner(seq: int) -> int:
        """The index of the segment holding `seq` (the last one past the head)."""
        return next(i for i, (_, _, upto) in enumerate(segments) if upto is None or seq <= upto)

    marks: list[tuple[EventView, int, int]] = []  # (row, older segment, newer segment)
    previous = owner(shown_before)
    for event in events:
        current = owner(event.seq)
        if current != previous:
            marks.append((event, min(current, previous), max(current, previous)))
        previous = current
    if not marks:
        return
    titles = dict(
        Session.objects.filter(pk__in=[segment[0] for segment in segments]).values_list(
            "pk", "title"
        )
    )
    for event, older, newer in marks:
        parent_id, _, upto = segments[older]
        child_id = segments[newer][0]
        event.boundary = ForkBoundary(
            seq=upto or 0,
            parent_id=str(parent_id),
            parent_title=titles.get(parent_id) or "the parent session",
            child_id=str(child_id),
            child_title=titles.get(child_id) or "the fork",
            child_is_session=child_id == session.pk,
        )


@dataclass
class FactView:
    key: str
    value: str  # JSON text for anything but a string
    multiline: bool
    seq: int | None


def fact_views(folded: FoldedState) -> list[FactView]:
    views = []
    for key in sorted(folded.facts):
        entry = folded.facts[key]
        value = entry.get("value") if isinstance(entry, dict) else entry
        text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
        views.append(
            FactView(
                key=key,
                value=text,
                multiline="\n" in text,
                seq=entry.get("seq") if isinstance(entry, dict) else None,
            )
        )
    return views


def facts_context(
    session: Session, folded: FoldedState | None = None, moment: Moment | None = None
) -> dict[str, Any]:
    """The facts panel: the latest value per key at the head, or at the `moment` shown."""
    folded = folded or state_or_unreadable(session, moment.seq if moment else None)
    return {
        "session": session,
        "facts": fact_views(folded),
        "facts_unreadable": folded.unreadable,
        "facts_seq": folded.seq,
        "moment": moment,
    }


def inspector_context(
    session: Session, at_seq: int | None, folded: FoldedState | None = None
) -> dict[str, Any]:
    """The working-state inspector at `at_seq` (default: head): state, facts, summary."""
    folded = folded or state_or_unreadable(session, at_seq)
    return {
        "session": session,
        "inspector": {
            "seq": folded.seq,
            "at_head": folded.seq == session.head_seq,
            "state": json.dumps(folded.state, indent=2, ensure_ascii=False),
            "state_empty": not folded.state,
            "facts": fact_views(folded),
            "summary": folded.summary,
            "content_hash": folded.content_hash,
            "unreadable": folded.unreadable,
        },
    }


def linked_tasks(session: Session) -> list[Any]:
    """The tasks linked to the session, with their steps, for the session page's task pane."""
    return list(tasks_for_session(session))


@dataclass
class TaskSlot:
    """One task of the session page's tasks pane: the live task, or (time travel) the task as
    it was at the moment's time (`as_of`; `as_of.existed` False: created after it)."""

    task: Any
    as_of: TaskAsOf | None = None


def task_slots(tasks: list[Any], moment: Moment | None) -> list[TaskSlot]:
    """The tasks pane's slots; at a moment, each task as it was when the event at that seq was
    written (task history carries times: the two logs meet by time)."""
    if moment is None:
        return [TaskSlot(task) for task in tasks]
    return [TaskSlot(past.task, past) for past in tasks_as_of(tasks, moment.time)]


def session_page_context(
    session: Session, membership: Membership, moment: Moment | None
) -> dict[str, Any]:
    """Everything of the session page that has a past, live or at `moment`: the header, the
    timeline, the facts, the working state and the linked tasks (the log is event_log's)."""
    at = moment.seq if moment else None
    folded = state_or_unreadable(session, at)  # shared by the facts panel and the inspector
    tasks = linked_tasks(session)
    context = session_header_context(session, membership, moment)
    context.update(facts_context(session, folded, moment))
    context.update(inspector_context(session, at, folded))
    context.update(artifacts_context(session, at))
    context.update(
        {
            "timeline": timeline(session, upto_seq=at),
            "tasks": tasks,
            "task_slots": task_slots(tasks, moment),
        }
    )
    return context


# --- Artifacts ---------------------------------------------------------------------------------

# Text shown inline on the page (escaped by the template), first bytes only; images are shown
# by <img> from the download view, which sends only INLINE_IMAGE_TYPES inline.
TEXT_PREVIEW_TYPES = frozenset(
    {"text/plain", "text/markdown", "text/csv", "application/json", "application/x-ndjson"}
)
TEXT_PREVIEW_BYTES = 2048
MAX_PREVIEWS = 10  # files opened per page view, at most


@dataclass(frozen=True)
class ArtifactRow:
    name: str
    latest: Artifact
    versions: list[Artifact]
    image: bool
    text: str | None  # the start of a text file, decoded; None when not previewed


def _text_start(artifact: Artifact) -> str | None:
    try:
        with open_artifact(artifact) as handle:
            data = handle.read(TEXT_PREVIEW_BYTES)
    except NotFound:
        return None
    text = data.decode("utf-8", errors="replace")
    return text + ("…" if artifact.size > TEXT_PREVIEW_BYTES else "")


def artifacts_context(session: Session, at: int | None) -> dict[str, Any]:
    """The artifacts the session had at `at` (live: now), latest version of each first, with a
    preview of the first few: images by URL, the start of text files."""
    rows = []
    for position, entry in enumerate(list_artifacts(session, at_seq=at)):
        latest = entry.latest
        previewed = position < MAX_PREVIEWS
        rows.append(
            ArtifactRow(
                name=entry.name,
                latest=latest,
                versions=list(reversed(entry.versions)),
                image=previewed and latest.content_type in INLINE_IMAGE_TYPES,
                text=_text_start(latest)
                if previewed and latest.content_type in TEXT_PREVIEW_TYPES
                else None,
            )
        )
    return {"artifacts": rows}
