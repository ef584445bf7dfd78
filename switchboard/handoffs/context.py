"""The data the handoff queue and workspace render (views and consumers share it), the JSON diffs
the workspace previews, and the readable lines of `handoff` log records (the session timeline).

Plain values only: the templates (autoescaped) make the markup.
"""

import difflib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.utils import timezone

from core.models import Membership, Role
from core.pages import role_context
from handoffs_app.models import Handoff, HandoffKind, HandoffStatus
from handoffs_app.queries import (
    QueueFilters,
    filter_queue,
    handoff_to_dict,
    queue_counts,
    queue_page,
)
from handoffs_app.services.records import sla_for
from sessions_app.models import EventKind, Session
from sessions_app.queries import slice_events
from sessions_app.services.state import FoldedState, merge_patch, state_at, state_or_unreadable
from switchboard.handoffs.forms import schema_edit_form
from switchboard.sessions.context import (
    ANSWER_WORDS,
    active_handoff,
    budget_bars,
    event_view,
    fact_views,
    handoff_records,
    handoff_step_text,
    linked_tasks,
    who,
)

QUEUE_PAGE_SIZE = 50
MESSAGES_PER_PAGE = 20
# Due within this long: the SLA cell turns amber.
DUE_SOON = timedelta(minutes=5)


# --- Queue -----------------------------------------------------------------------------------


@dataclass
class QueueRow:
    handoff: Handoff
    sla: str  # "ok" | "soon" | "overdue"
    overdue: bool


def sla_level(handoff: Handoff, now: datetime) -> str:
    """ "overdue", "soon" (due within DUE_SOON), "ok"; "done" once answered (or over)."""
    if handoff.status not in (HandoffStatus.OPEN, HandoffStatus.CLAIMED):
        return "done"
    if handoff.overdue or (
        handoff.status in (HandoffStatus.OPEN, HandoffStatus.CLAIMED) and handoff.due_at <= now
    ):
        return "overdue"
    if handoff.due_at - now <= DUE_SOON:
        return "soon"
    return "ok"


def queue_rows(handoffs: list[Handoff], now: datetime | None = None) -> list[QueueRow]:
    now = now or timezone.now()
    rows = []
    for handoff in handoffs:
        level = sla_level(handoff, now)
        rows.append(QueueRow(handoff=handoff, sla=level, overdue=level == "overdue"))
    return rows


def queue_context(
    project_id: int, filters: QueueFilters, *, user: Any, cursor: str | None
) -> dict[str, Any]:
    """One page of the queue (priority, then wait) and the counts above it."""
    page, next_cursor = queue_page(
        filter_queue(project_id, filters, user=user), cursor=cursor, limit=QUEUE_PAGE_SIZE
    )
    return {
        "rows": queue_rows(page),
        "next_cursor": next_cursor,
        "counts": queue_counts(project_id, user=user),
    }


# --- Diffs -----------------------------------------------------------------------------------


@dataclass
class DiffLine:
    op: str  # "add" | "del" | "same"
    text: str


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def json_diff(before: Any, after: Any) -> list[DiffLine]:
    """A line diff of two JSON documents (pretty-printed with sorted keys)."""
    lines = []
    for line in difflib.ndiff(pretty(before).splitlines(), pretty(after).splitlines()):
        code, text = line[:2], line[2:]
        if code == "? ":
            continue
        lines.append(DiffLine({"+ ": "add", "- ": "del"}.get(code, "same"), text))
    return lines


@dataclass
class Preview:
    """A change shown before it is sent: what it would do, as a diff, and the form to send it."""

    what: str  # "edit" | "state"
    title: str
    diff: list[DiffLine]
    value: str  # the JSON to send (hidden in the confirm form)
    changed: bool


def edit_preview(handoff: Handoff, args: dict[str, Any]) -> Preview:
    proposed = (handoff.payload.get("action_request") or {}).get("args") or {}
    diff = json_diff(proposed, args)
    return Preview(
        what="edit",
        title="Approve with these arguments",
        diff=diff,
        value=json.dumps(args, ensure_ascii=False),
        changed=any(d.op != "same" for d in diff),
    )


def state_preview(session: Session, patch: dict[str, Any]) -> Preview:
    before = state_at(session).state
    diff = json_diff(before, merge_patch(before, patch))
    return Preview(
        what="state",
        title="Apply this patch to the working state",
        diff=diff,
        value=json.dumps(patch, ensure_ascii=False),
        changed=any(d.op != "same" for d in diff),
    )


def answer_words(answer: Any) -> str:
    """ "approved with edited arguments by alice", "answered by bob", …"""
    if not isinstance(answer, dict):
        return ""
    what = ANSWER_WORDS.get(str(answer.get("type", "")), str(answer.get("type", "answered")))
    return f"{what} by {who(answer.get('by', '?'))}"


# --- Workspace -------------------------------------------------------------------------------

# The workspace's action forms (handoffs.views.ACTIONS; renew is the heartbeat's).
ACTION_FORMS = [
    (name, f"dashboard:handoff_{name}")
    for name in (
        "claim",
        "release",
        "reassign",
        "respond",
        "accept",
        "reject",
        "ignore",
        "edit",
        "budget",
        "state",
        "facts",
        "take_over",
        "message",
        "hand_back",
        "close",
    )
]


def operators_of(project_id: int) -> list[Any]:
    """Members who may hold a handoff (operator and up), for the admin's reassign."""
    user_ids = Membership.objects.filter(
        project_id=project_id, role__in=[Role.OPERATOR, Role.ADMIN]
    ).values("user_id")
    users: QuerySet[Any] = get_user_model().objects.filter(pk__in=user_ids)
    return list(users.order_by("username"))


def message_page(session: Session, before_seq: int | None = None) -> dict[str, Any]:
    """The last messages of the conversation (newest last), and where "load more" continues."""
    before = min(before_seq or session.head_seq + 1, session.head_seq + 1)
    page = slice_events(
        session,
        before_seq=before,
        limit=MESSAGES_PER_PAGE,
        kinds=[EventKind.MESSAGE],
        newest_first=True,
    )
    events = [event_view(r) for r in reversed(page.rows)]
    return {
        "conversation_messages": events,
        "more_before": events[0].seq if page.has_more and events else None,
    }


def request_view(handoff: Handoff) -> dict[str, Any]:
    """The request as the workspace shows it, by kind."""
    payload = handoff.payload or {}
    view: dict[str, Any] = {"payload_pretty": pretty(payload)}
    if handoff.kind == HandoffKind.QUESTION:
        view["question"] = str(payload.get("question", ""))
        view["choices"] = list(payload.get("choices") or [])
    elif handoff.kind == HandoffKind.APPROVAL:
        request = payload.get("action_request") or {}
        view["action"] = str(request.get("action", ""))
        view["args"] = request.get("args") or {}
        view["args_pretty"] = pretty(view["args"])
        view["description"] = str(payload.get("description", ""))
        view["config"] = payload.get("config") or {}
    elif handoff.kind == HandoffKind.BUDGET:
        view["budget"] = payload.get("budget")
        view["usage"] = payload.get("usage")
    return view


def workspace_version(handoff: Handoff) -> str:
    """The version of what the workspace's pushes follow: every write to the handoff sets its
    updated_at, and every write to its session raises head_seq. The page hands it to its
    socket, which skips its catch-up frame when neither moved since the render. (A linked
    task and a lease running out are not pushed either: the page's next push, and its own
    lease timer, show those.)"""
    return f"{handoff.updated_at.timestamp():.6f}:{handoff.session.head_seq}"


def workspace_context(
    handoff: Handoff, membership: Membership, user: Any, *, folded: FoldedState | None = None
) -> dict[str, Any]:
    """Everything the workspace shows, for this user (whose role and lease decide the actions)."""
    session = handoff.session
    now = timezone.now()
    data = handoff_to_dict(handoff, now=now)
    folded = folded or state_or_unreadable(session)
    is_holder = (
        handoff.lease_holder_id == user.pk
        and handoff.status
        in (HandoffStatus.CLAIMED, HandoffStatus.ANSWERED, HandoffStatus.TAKEN_OVER)
        and handoff.lease_expires_at is not None
        and handoff.lease_expires_at > now
    )
    roles = role_context(membership)
    allowed = set(data["allowed_answers"])
    # Claimed or taken over under a lease that ran out: anyone may claim it now (the service
    # lapses it first), its holder included.
    lapsed = (
        handoff.status in (HandoffStatus.CLAIMED, HandoffStatus.TAKEN_OVER)
        and handoff.lease_expires_at is not None
        and handoff.lease_expires_at <= now
    )
    lease_seconds = sla_for(handoff.project_id).lease_seconds
    context = {
        "handoff": handoff,
        "data": data,
        "session": session,
        "request_view": request_view(handoff),
        "sla": sla_level(handoff, now),
        "is_holder": is_holder,
        "is_active": handoff.is_active,
        "can_claim": roles["can_operate"] and (handoff.status == HandoffStatus.OPEN or lapsed),
        "lost_claim": lapsed and handoff.lease_holder_id == user.pk,
        # The workspace renews well inside the lease (a third of it: two renewals may fail
        # before it lapses), and says so at once when the lease is gone.
        "renew_every": max(1, lease_seconds // 3),
        "lease_remaining": (
            max(0.0, (handoff.lease_expires_at - now).total_seconds())
            if is_holder and handoff.lease_expires_at
            else 0
        ),
        "can_answer": is_holder and handoff.status == HandoffStatus.CLAIMED,
        "allowed": allowed,
        "can_work": is_holder,
        "can_take_over": is_holder
        and handoff.status in (HandoffStatus.CLAIMED, HandoffStatus.ANSWERED),
        "taken_over": handoff.status == HandoffStatus.TAKEN_OVER,
        "state_pretty": pretty(folded.state) if folded.state else "",
        "state_json": json.dumps(folded.state, ensure_ascii=False),
        "state_unreadable": folded.unreadable,
        "summary": folded.summary,
        "facts": fact_views(folded),
        "facts_seq": folded.seq,
        "budget": budget_bars(session),
        "tasks": linked_tasks(session),
        "records": handoff_records(session, handoff_id=str(handoff.pk)),
        "live_since": workspace_version(handoff),
        "action_forms": ACTION_FORMS,
        "answer_words": answer_words(handoff.answer),
        # The arguments as form fields when the approval carries their JSON Schema.
        "edit_form": schema_edit_form(handoff) if handoff.kind == HandoffKind.APPROVAL else None,
        "answer_args_pretty": (
            pretty(handoff.answer["args"])
            if isinstance(handoff.answer, dict) and handoff.answer.get("args") is not None
            else ""
        ),
        **message_page(session),
        **roles,
    }
    if roles["is_admin"] and handoff.is_active:
        context["operators"] = operators_of(handoff.project_id)
    return context


__all__ = [
    "DiffLine",
    "Preview",
    "QueueRow",
    "active_handoff",
    "edit_preview",
    "handoff_records",
    "handoff_step_text",
    "json_diff",
    "message_page",
    "queue_context",
    "queue_counts",
    "state_preview",
    "workspace_context",
    "workspace_version",
]
