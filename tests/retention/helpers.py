"""Test data for retention, made through the product's services."""

from datetime import timedelta

from django.utils import timezone

from core.actors import Actor
from sessions_app.models import Session
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import archive_session, close_session

SYSTEM = Actor.system("tests")
LATER = timedelta(days=3650)  # far past every default duration


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
