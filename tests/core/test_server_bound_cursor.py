"""core.storage.server_bound_cursor: the API's hot fixed statements bind on the server, so
PostgreSQL plans each of them once per connection (a prepared statement) instead of parsing and
planning the text on every call; Django's own queries stay as they were."""

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from core.actors import Actor
from sessions_app import storage
from sessions_app.models import Event, Session
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.log import build_events
from tests.factories import make_session

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [statement for (statement,) in cursor.fetchall()]


def test_a_session_look_up_is_prepared_on_its_second_run_and_reads_the_same_row(project):
    session = make_session(project, title="looked up")
    # (Its connection may have run it before, in an earlier test: three runs prepare it anyway.)
    first = storage.session_in_project(session.pk, project.pk)
    second = storage.session_in_project(session.pk, project.pk)
    third = storage.session_in_project(session.pk, project.pk)
    looked_up = [s for s in prepared_statements() if "JOIN" in s and "project_id = $2" in s]
    assert len(looked_up) == 1, prepared_statements()
    orm = Session.objects.get(pk=session.pk)
    for read in (first, second, third):
        assert read is not None
        assert (read.pk, read.title, read.agent.name) == (session.pk, "looked up", "test-agent")
        assert read.created_at == orm.created_at
        assert read.created_at.tzinfo == orm.created_at.tzinfo  # loaded in the ORM's time zone
    assert storage.session_in_project(session.pk, project.pk + 1) is None


def test_appends_through_the_prepared_statement_keep_their_seqs_and_usage(
    transactional_db, project
):
    # (Outside a transaction: only there does an append take the one-statement path.)
    session = make_session(project)
    actor = Actor.system("test")
    for n in range(1, 5):
        draft = EventDraft(kind="message", role="user", content={"text": f"m{n}"}, tokens=n)
        result = append_events(Session(pk=session.pk, project_id=project.pk), [draft], actor=actor)
        assert result.head_seq == n
    assert any(s.startswith("WITH s AS (UPDATE") for s in prepared_statements())
    session.refresh_from_db()
    assert (session.head_seq, session.tokens_used) == (4, 10)
    seqs = list(Event.objects.filter(session=session).order_by("seq").values_list("seq", "content"))
    assert seqs == [(n, {"text": f"m{n}"}) for n in range(1, 5)]


def test_an_integrity_error_is_djangos_and_leaves_the_transaction_usable(project):
    session = make_session(project)
    actor = Actor.system("test")
    keyed = EventDraft(kind="note", content={}, idempotency_key="k-1")
    append_events(session, [keyed], actor=actor)
    with pytest.raises(IntegrityError, match="event_unique_idempotency_key"), transaction.atomic():
        storage.append_in_one_statement(
            session.pk,
            project.pk,
            build_events(session, [keyed], actor=actor, first=None),
            tokens=0,
            cost=Decimal("0"),
            now=session.updated_at,
            writable_statuses=["open", "paused", "resumed"],
            expected_head_seq=None,
        )
    session.refresh_from_db()
    assert session.head_seq == 1  # the refused statement allocated nothing
    assert storage.session_in_project(session.pk, project.pk) is not None  # still usable


def test_its_queries_are_logged_even_once_prepared(project):
    session = make_session(project)
    with CaptureQueriesContext(connection) as captured:
        for _ in range(3):  # the later runs are of the prepared statement
            storage.session_in_project(session.pk, project.pk)
    logged = [q["sql"] for q in captured.captured_queries]
    assert len(logged) == 3
    assert all(sql.startswith("SELECT") and "JOIN" in sql for sql in logged), logged


@pytest.mark.parametrize(("value", "expected"), [("", "2"), ("off", "None"), ("on", "2")])
def test_db_prepared_statements_sets_the_threshold(value, expected):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DB_PREPARED_STATEMENTS": value,
    }
    env.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/switchboard")
    code = (
        "import django; django.setup(); from django.conf import settings;"
        " print(settings.DATABASES['default']['OPTIONS']['prepare_threshold'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == expected
