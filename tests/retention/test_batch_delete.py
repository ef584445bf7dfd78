"""Deletion is set-based per batch (one DELETE of the batch's events, one per dependent
table), all or nothing: when one session of the batch can't be deleted, the batch falls back
to one session at a time, the others are deleted, and only the culprit is recorded. Each
deleted session keeps its own tombstone, audit entry and counts."""

import time_machine
from django.db import connection

from core.models import AuditEntry
from retention_app.models import SessionTombstone
from retention_app.services.policies import save_policy
from sessions_app.models import Event, Session, Snapshot
from sessions_app.services.state import take_snapshot
from tests.factories import make_session
from tests.retention.helpers import POLICY, SYSTEM, append, archived, at, conversation
from tests.retention.test_policy import enforce


def _archived_sessions(project, sizes: list[int]) -> list[Session]:
    made = []
    with time_machine.travel(at(0), tick=False):
        for n in sizes:
            session = make_session(project)
            append(session, conversation(n))
            if n >= 8:
                take_snapshot(session, 4, reason="agent")
            made.append(archived(session))
    return made


def test_a_batch_is_deleted_together_with_a_tombstone_and_audit_each(db, project):
    save_policy(project, POLICY, actor=SYSTEM)
    sessions = _archived_sessions(project, [5, 9, 12])
    counts = {s.pk: Event.objects.filter(session=s).count() for s in sessions}
    (run,) = enforce(project, 400)
    assert run.deleted == 3 and run.errors == []
    assert run.events_freed == sum(counts.values())
    assert not Session.objects.filter(pk__in=counts).exists()
    assert not Event.objects.filter(session_id__in=counts).exists()
    assert not Snapshot.objects.filter(session_id__in=counts).exists()
    for session in sessions:
        tomb = SessionTombstone.objects.get(session_id=session.pk)
        assert tomb.events_deleted == counts[session.pk]
        assert tomb.snapshots_deleted == (1 if session.head_seq >= 8 else 0)
    audited = AuditEntry.objects.filter(action="session.delete")
    assert sorted(audited.values_list("target_id", flat=True)) == sorted(str(k) for k in counts)


def test_one_undeletable_session_falls_back_to_one_at_a_time_and_only_it_is_recorded(db, project):
    save_policy(project, POLICY, actor=SYSTEM)
    sessions = _archived_sessions(project, [5, 6, 7])
    stuck = sessions[1]
    # A row elsewhere that refuses its session's deletion (as a dependant retention does not
    # know of would): a real foreign key, ON DELETE RESTRICT, in this test's transaction.
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE test_retention_pin (session_id uuid REFERENCES"
            " sessions_app_session (id) ON DELETE RESTRICT)"
        )
        cursor.execute("INSERT INTO test_retention_pin VALUES (%s)", [stuck.pk])
    (run,) = enforce(project, 400)
    assert run.deleted == 2
    assert [e["session_id"] for e in run.errors] == [str(stuck.pk)]
    assert list(Session.objects.filter(pk__in=[s.pk for s in sessions])) == [stuck]
    assert Event.objects.filter(session=stuck).count() == stuck.head_seq  # untouched
    assert not SessionTombstone.objects.filter(session_id=stuck.pk).exists()
    assert SessionTombstone.objects.count() == 2
