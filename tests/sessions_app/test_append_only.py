"""Invariant 2: the database itself refuses to change or delete an event, except in retention."""

import pytest
from django.db import DatabaseError, connection, transaction

from core.actors import Actor
from sessions_app.models import Event
from sessions_app.retention import allow_event_deletion
from sessions_app.services.events import EventDraft, append_events
from tests.factories import make_session


@pytest.fixture
def session(project):
    session = make_session(project)
    append_events(
        session,
        [
            EventDraft(kind="message", role="user", content={"text": "hello"}),
            EventDraft(kind="note", content={"n": 2}),
        ],
        actor=Actor.system(),
    )
    return session


def _raw(sql: str, params: list) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _row(session, seq):
    return Event.objects.filter(session=session, seq=seq).values().get()


def test_it_refuses_a_raw_sql_update_of_an_event(session):
    before = _row(session, 1)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        _raw(
            "UPDATE sessions_app_event SET text = %s, tokens = 99"
            " WHERE session_id = %s AND seq = 1",
            ["tampered", session.pk],
        )
    assert _row(session, 1) == before


def test_it_refuses_an_orm_update_and_a_raw_sql_delete_of_an_event(session):
    before = list(Event.objects.filter(session=session).order_by("seq").values())
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Event.objects.filter(session=session).update(kind="decision")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        _raw("DELETE FROM sessions_app_event WHERE session_id = %s", [session.pk])
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Event.objects.filter(session=session, seq=2).delete()
    assert list(Event.objects.filter(session=session).order_by("seq").values()) == before


def test_it_allows_delete_only_inside_the_retention_block(session):
    with transaction.atomic():
        with allow_event_deletion():
            deleted = _raw(
                "DELETE FROM sessions_app_event WHERE session_id = %s AND seq = 2",
                [session.pk],
            )
        assert deleted == 1
        # Same transaction, after the block: closed again.
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            Event.objects.filter(session=session, seq=1).delete()
    # After that transaction: closed.
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Event.objects.filter(session=session, seq=1).delete()
    assert list(Event.objects.filter(session=session).values_list("seq", flat=True)) == [1]
    # Updates stay refused even inside the block.
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():  # noqa: SIM117
        with allow_event_deletion():
            Event.objects.filter(session=session, seq=1).update(text="x")
    assert _row(session, 1)["text"] == "hello"


def test_it_closes_the_retention_block_even_when_it_raises(session):
    with transaction.atomic():
        with pytest.raises(RuntimeError, match="boom"), allow_event_deletion():
            raise RuntimeError("boom")
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            Event.objects.filter(session=session, seq=1).delete()
    assert Event.objects.filter(session=session).count() == 2


def test_it_refuses_the_retention_block_outside_a_transaction(transactional_db, session):
    with pytest.raises(RuntimeError, match="inside transaction.atomic"), allow_event_deletion():
        pass  # pragma: no cover
    with pytest.raises(DatabaseError, match="append-only"):
        Event.objects.filter(session=session).delete()
    assert Event.objects.filter(session=session).count() == 2


def test_the_retention_block_nests_and_closes_with_the_outermost(session):
    """A retention batch opens the guard once; each session's deletion opens it again inside:
    the inner block leaves it open for the batch, the outer one closes it."""
    delete = "DELETE FROM sessions_app_event WHERE session_id = %s AND seq = %s"
    with transaction.atomic(), allow_event_deletion():
        with allow_event_deletion():
            assert _raw(delete, [session.pk, 2]) == 1
        # Still inside the batch's block: open.
        with transaction.atomic():
            assert _raw(delete, [session.pk, 1]) == 1
    assert not Event.objects.filter(session=session).exists()

    other = make_session(session.project)
    append_events(other, [EventDraft(kind="note", content={"n": 1})], actor=Actor.system())
    with transaction.atomic():
        with allow_event_deletion(), allow_event_deletion():
            pass
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            _raw(delete, [other.pk, 1])
    assert Event.objects.filter(session=other).count() == 1
