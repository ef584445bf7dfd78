"""Test data for retention, made through the product's services."""

from datetime import timedelta

from django.utils import timezone

from core.actors import Actor
from sessions_app.models import Session
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import archive_session, close_session

SYSTEM = Actor.system("tests")
LATER = timedelta(days=3650)  # far past every default duration

DAY = 24 * 3600
# The frozen clock's day 0 (`at`): far enough back that every rule of POLICY falls due by now.
T0 = timezone.now().replace(microsecond=0) - timedelta(days=400)

# Every rule set, each at its own age; no outcome or tag kept longer.
POLICY = {
    "close_idle_after": DAY,
    "close_paused_after": 3 * DAY,
    "archive_closed_after": 7 * DAY,
    "compact_after": 30 * DAY,
    "delete_after": 90 * DAY,
    "outcome_compact_after": 60 * DAY,
    "outcome_delete_after": 180 * DAY,
    "keep_outcomes": [],
    "keep_tags": [],
}

# A body for PUT /retention/policy that the API takes: some rules off (null), errors kept longer.
POLICY_BODY = {
    "close_idle_after": 3600,
    "close_paused_after": None,
    "archive_closed_after": 86400,
    "compact_after": 86400,
    "delete_after": None,
    "outcome_compact_after": None,
    "outcome_delete_after": None,
    "keep_outcomes": ["error"],
    "keep_tags": [],
}


def at(days: float):
    """The moment `days` after T0."""
    return T0 + timedelta(days=days)


def later():
    return timezone.now() + LATER


def append(session: Session, drafts: list[EventDraft]) -> None:
    for start in range(0, len(drafts), 1000):
        append_events(session, drafts[start : start + 1000], actor=SYSTEM)
    session.refresh_from_db()


def conversation(n: int, *, seed: int = 0) -> list[EventDraft]:
    """A mixed history: messages, tool calls, state patches, facts, decisions, errors."""
    drafts: list[EventDraft] = []
    for i in range(n):
        k = (i + seed) % 7
        if k == 0:
            drafts.append(EventDraft(kind="message", role="user", content={"text": f"hello {i}"}))
        elif k == 1:
            drafts.append(EventDraft(kind="tool_call", content={"name": "lookup", "arguments": {}}))
        elif k == 2:
            drafts.append(EventDraft(kind="state", content={"step": i, f"k{i % 3}": i}))
        elif k == 3:
            drafts.append(EventDraft(kind="fact", content={"key": f"f{i % 4}", "value": i}))
        elif k == 4:
            drafts.append(EventDraft(kind="decision", content={"decision": "go", "rationale": "x"}))
        elif k == 5:
            drafts.append(EventDraft(kind="note", content={"i": i}))
        else:
            drafts.append(
                EventDraft(kind="message", role="assistant", content={"text": f"answer {i}"})
            )
    return drafts


def closed(session: Session) -> Session:
    close_session(session, actor=SYSTEM, reason="done")
    session.refresh_from_db()
    return session


def archived(session: Session) -> Session:
    closed(session)
    archive_session(session, actor=SYSTEM, reason="done")
    session.refresh_from_db()
    return session
