"""Personas for the dashboard tests: an admin, an operator and a viewer of one project, and an
outsider who is a member of another project only (healthchecks' alice/bob/charlie)."""

from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from core.actors import Actor
from core.models import Project, Role
from sessions_app.models import Session
from sessions_app.services.events import EventDraft, append_events
from tests.caching import clear_cache
from tests.factories import make_member, make_project, make_session


@dataclass
class Team:
    project: Project
    other_project: Project
    admin: Any
    operator: Any
    viewer: Any
    outsider: Any

    def client(self, who: str, **kwargs: Any) -> Client:
        client = Client(**kwargs)
        client.force_login(getattr(self, who))
        return client


@pytest.fixture(autouse=True)
def _fresh_cache():
    """The overview caches its chart per project, and ids repeat between tests."""
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def team(db) -> Team:
    project, other = make_project(), make_project()
    return Team(
        project=project,
        other_project=other,
        admin=make_member(project, Role.ADMIN),
        operator=make_member(project, Role.OPERATOR),
        viewer=make_member(project, Role.VIEWER),
        outsider=make_member(other, Role.ADMIN),
    )


def append(session: Session, *drafts: EventDraft) -> None:
    append_events(session, list(drafts), actor=Actor.system("tests"))


def message(text: str, role: str = "user", **extra: Any) -> EventDraft:
    return EventDraft(kind="message", role=role, content={"text": text}, **extra)


def fact(key: str, value: Any) -> EventDraft:
    return EventDraft(kind="fact", content={"key": key, "value": value})


def state(patch: dict[str, Any]) -> EventDraft:
    return EventDraft(kind="state", content=patch)


@pytest.fixture
def session(team: Team) -> Session:
    """A session with a few events of several kinds: seq 1..6."""
    s = make_session(
        team.project,
        agent="triage",
        title="Refund for order 4411",
        metadata={"customer": "cust-101"},
    )
    append(
        s,
        message("Where is my refund?"),
        state({"stage": "triage"}),
        fact("customer_tier", "gold"),
        message("Looking into it.", role="assistant"),
        EventDraft(kind="decision", content={"decision": "escalate", "rationale": "over $500"}),
        state({"stage": "waiting"}),
    )
    s.refresh_from_db()
    return s
