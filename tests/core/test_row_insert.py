"""core.storage.insert_in_one_statement writes each row with the ORM's own INSERT: built once
per model (core.storage._row_insert) it must be exactly what Django's compiler writes, SQL and
parameters, for every model the services insert that way."""

import datetime as dt
from decimal import Decimal

import pytest
from django.db.models.functions import Now
from django.utils import timezone

from core import storage
from core.actors import Actor
from core.domain_events import outbox_message
from core.models import OutboxMessage
from core.services.audit import audit_entry
from retention_app.models import Compaction
from sessions_app.domain_events import SessionOpened
from sessions_app.models import Session, SessionStatus
from tests.factories import make_session

pytestmark = pytest.mark.django_db

MOMENT = dt.datetime(2026, 1, 2, 3, 4, 5, 600007, tzinfo=dt.UTC)


@pytest.fixture
def frozen(monkeypatch):
    # auto_now fields take timezone.now() in pre_save: both builds must see the same moment.
    monkeypatch.setattr(timezone, "now", lambda: MOMENT)


def rows(project):
    parent = make_session(project)
    fork = Session(
        project_id=project.pk,
        agent_id=parent.agent_id,
        title='Fork of "é" \n',
        status=SessionStatus.OPEN,
        metadata={"nested": [1, "é", None, {"k": True}]},
        head_seq=3,
        budget_max_tokens=10,
        budget_max_cost=Decimal("1.250000"),
        parent=parent,
        fork_seq=3,
        ancestry=[[str(parent.pk), 3]],
    )
    entry = audit_entry(
        project,
        actor=Actor.system("test"),
        action="session.fork",
        target_type="session",
        target_id=fork.pk,
        detail={"parent": str(parent.pk), "at_seq": 3},
    )
    opened = SessionOpened(
        project_id=project.pk, session_id=str(fork.pk), parent_id=str(parent.pk), fork_seq=3
    )
    compaction = Compaction(
        project_id=project.pk,
        session=parent,
        after_seq=0,
        boundary_seq=2,
        events_removed=2,
        bytes_removed=120,
        summary="two events",
        summariser="default",
        state_hash_before="abc",
        state_hash_after="",
    )
    return [fork, entry, outbox_message(opened), compaction]


def comparable(built: tuple[str, list]) -> tuple[str, list]:
    """psycopg's JSON wrappers compare by identity: compare their type and what they wrap."""
    sql, params = built
    return sql, [(type(p), getattr(p, "obj", p)) for p in params]


def test_each_rows_insert_is_the_one_djangos_compiler_writes(project, frozen):
    for instance in rows(project):
        with_pk = instance.pk is not None
        model = type(instance)
        assert storage._insert_template(model, with_pk) is not None, model  # the fast path
        built = storage._row_insert(instance, with_pk=with_pk)
        compiled = storage._compiled_row_insert(instance, with_pk=with_pk)
        assert comparable(built) == comparable(compiled), model


def test_a_value_that_is_an_expression_goes_through_the_compiler(project, frozen):
    message = OutboxMessage(
        project_id=project.pk, type="t", groups=[], payload={}, relayed_at=Now()
    )
    sql, params = storage._row_insert(message, with_pk=False)
    assert "STATEMENT_TIMESTAMP()" in sql
    assert comparable((sql, params)) == comparable(
        storage._compiled_row_insert(message, with_pk=False)
    )


def test_rows_written_in_one_statement_read_back_as_built(project, frozen):
    fork, entry, message, _ = rows(project)
    storage.insert_in_one_statement([fork, entry, message])
    stored = Session.objects.get(pk=fork.pk)
    assert (stored.title, stored.metadata, stored.budget_max_cost) == (
        fork.title,
        fork.metadata,
        Decimal("1.250000"),
    )
    assert stored.created_at == MOMENT and stored.ancestry == fork.ancestry
    assert OutboxMessage.objects.get(pk=message.pk).payload == message.payload
    assert entry.pk is not None and not entry._state.adding
