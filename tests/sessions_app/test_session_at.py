"""sessions_app.queries.session_at: what a session was at one seq (the session page's time
travel): when that was, its status, its usage and its budget then."""

from decimal import Decimal

import pytest
from django.db import transaction

from core.actors import Actor
from core.errors import InvalidInput
from retention_app.services.compaction import compact_session
from sessions_app.errors import Compacted
from sessions_app.models import Event
from sessions_app.queries import session_at
from sessions_app.services.control import set_budget
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import close_session, pause_session, resume_session
from sessions_app.services.sessions import fork_session
from tests.factories import make_project, make_session

pytestmark = pytest.mark.django_db

SYSTEM = Actor.system("tests")


def message(text: str, tokens: int = 0, cost: str = "0") -> EventDraft:
    return EventDraft(
        kind="message", role="user", content={"text": text}, tokens=tokens, cost=Decimal(cost)
    )


def test_it_gives_the_time_status_usage_and_budget_at_each_seq():
    session = make_session(make_project(), budget_max_tokens=1000)
    append_events(session, [message("a", 100, "0.10"), message("b", 200, "0.20")], actor=SYSTEM)
    pause_session(session, actor=SYSTEM, reason="look")  # seq 3
    with transaction.atomic():
        set_budget(session, max_tokens=5000, max_cost=None, actor=SYSTEM)
    resume_session(session, actor=SYSTEM, reason="go on")  # seq 4
    append_events(session, [message("c", 300, "0.30")], actor=SYSTEM)  # seq 5
    session.refresh_from_db()
    times = dict(Event.objects.filter(session=session).values_list("seq", "created_at"))

    at0 = session_at(session, 0)
    assert (at0.time, at0.status, at0.tokens_used, at0.cost_used) == (
        session.created_at,
        "open",
        0,
        Decimal("0"),
    )
    at2 = session_at(session, 2)
    assert (at2.time, at2.status, at2.tokens_used, at2.cost_used) == (
        times[2],
        "open",
        300,
        Decimal("0.30"),
    )
    assert at2.budget_max_tokens == 1000  # raised later, after seq 3
    at3 = session_at(session, 3)
    assert (at3.status, at3.tokens_used, at3.budget_max_tokens) == ("paused", 300, 1000)
    at4 = session_at(session, 4)
    assert (at4.status, at4.budget_max_tokens) == ("resumed", 5000)
    at5 = session_at(session, 5)
    assert (at5.time, at5.tokens_used, at5.cost_used, at5.head_seq) == (
        times[5],
        600,
        Decimal("0.60"),
        5,
    )


def test_it_refuses_a_seq_outside_the_log():
    session = make_session(make_project())
    append_events(session, [message("a")], actor=SYSTEM)
    session.refresh_from_db()
    for seq in (-1, 2):
        with pytest.raises(InvalidInput):
            session_at(session, seq)


def test_inside_a_compacted_range_it_refuses_and_at_its_end_it_answers():
    session = make_session(make_project())
    append_events(session, [message(f"m{i}", 10) for i in range(6)], actor=SYSTEM)
    close_session(session, actor=SYSTEM, reason="done")  # seq 7
    session.refresh_from_db()
    compact_session(session, actor=SYSTEM)
    session.refresh_from_db()
    through = session.compacted_through_seq
    assert through >= 6
    with pytest.raises(Compacted) as refused:
        session_at(session, 3)
    assert refused.value.detail["through_seq"] == through
    end = session_at(session, through)
    assert end.seq == through and end.status in ("open", "closed")


def test_a_fork_counts_its_own_usage_and_reads_its_parents_times():
    parent = make_session(make_project())
    append_events(parent, [message("a", 100), message("b", 100)], actor=SYSTEM)
    parent.refresh_from_db()
    fork = fork_session(parent, at_seq=2, actor=SYSTEM)
    append_events(fork, [message("own", 50)], actor=SYSTEM)
    fork.refresh_from_db()
    parent_time = Event.objects.get(session=parent, seq=1).created_at
    at1 = session_at(fork, 1)
    assert (at1.time, at1.tokens_used, at1.status) == (parent_time, 0, "open")
    assert session_at(fork, 3).tokens_used == 50
