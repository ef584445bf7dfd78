"""The retention jobs on real Celery workers: beat installs and sends them; kill -9 of a worker
in the middle of compacting and of deleting a large session loses nothing and leaves nothing
half done, and the next run finishes the job (invariant 9)."""

import os
import signal
import uuid
from datetime import timedelta

import psutil
import pytest
from django.utils import timezone

from retention_app.models import Compaction, RetentionRun, SessionTombstone
from retention_app.services.policies import save_policy
from sessions_app.models import Event, Session
from sessions_app.services.state import state_at
from tests.factories import make_session
from tests.retention.helpers import SYSTEM, append, archived, closed, conversation
from tests.servers import celery_processes, wait_until

pytestmark = [pytest.mark.requires_redis("retention jobs on Celery"), pytest.mark.slow]

LARGE = 20_000
QUICK = {
    "close_idle_after": None,
    "close_paused_after": None,
    "archive_closed_after": None,
    "compact_after": 1,
    "delete_after": 1,
    "outcome_compact_after": None,
    "outcome_delete_after": None,
    "keep_outcomes": [],
    "keep_tags": [],
}


def _worker(queue: str) -> psutil.Process:
    (worker,) = [
        p
        for p in psutil.Process().children(recursive=True)
        if queue in " ".join(p.cmdline()) and "worker" in p.cmdline()
    ]
    return worker


def _large(project, *, archive: bool) -> Session:
    session = make_session(project)
    append(session, conversation(LARGE))
    session.refresh_from_db()
    return archived(session) if archive else closed(session)


def _kill_mid_job(job: str, project, tmp_path, *, expect_marker: str):
    from config.celery import app

    queue = f"sb-retention-{uuid.uuid4().hex[:12]}"
    marker = tmp_path / "marker"
    send = {"kwargs": {"project_ids": [project.pk], "limit": 5}, "queue": queue}
    with celery_processes(
        queue,
        tmp_path,
        app="tests.retention.slow_celery",
        RETENTION_MARKER=str(marker),
        RETENTION_HOLD_SECONDS="60",
    ) as log:
        wait_until(lambda: "ready." in log.read_text(), log)
        app.send_task(job, **send)
        wait_until(marker.exists, log, timeout=120)
        assert marker.read_text() == expect_marker
        worker = _worker(queue)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
    return app, queue, send


def test_a_worker_killed_mid_compaction_leaves_nothing_half_compacted(
    transactional_db, project, tmp_path
):
    save_policy(project, QUICK, actor=SYSTEM)
    session = _large(project, archive=False)
    events_before = Event.objects.filter(session=session).count()
    hash_before = state_at(session).state_hash

    app, queue, send = _kill_mid_job(
        "retention_app.compact_sessions", project, tmp_path, expect_marker=str(session.pk)
    )
    # The kill landed after the deletes, before the commit: all of it rolled back.
    wait_until(lambda: not _locked(session), tmp_path / "celery.log")
    session.refresh_from_db()
    assert session.compacted_through_seq == 0 and session.compaction_id is None
    assert Event.objects.filter(session=session).count() == events_before
    assert not Compaction.objects.exists()

    (tmp_path / "next").mkdir()
    with celery_processes(queue, tmp_path / "next") as log:
        wait_until(lambda: "ready." in log.read_text(), log)
        app.send_task("retention_app.compact_sessions", **send)
        wait_until(lambda: Compaction.objects.filter(session=session).exists(), log, 120)
    session.refresh_from_db()
    compaction = Compaction.objects.get(session=session)
    assert session.compacted_through_seq == session.head_seq
    assert compaction.state_hash_before == compaction.state_hash_after == hash_before
    assert state_at(session).state_hash == hash_before
    assert not Event.objects.filter(session=session, tier="transient").exists()
    assert Event.objects.filter(session=session).count() == events_before - (
        compaction.events_removed
    )
    assert RetentionRun.objects.filter(compacted=1).count() == 1


def test_a_worker_killed_mid_deletion_leaves_the_session_whole_and_the_next_run_deletes_it(
    transactional_db, project, tmp_path
):
    save_policy(project, {**QUICK, "compact_after": None}, actor=SYSTEM)
    session = _large(project, archive=True)
    events_before = Event.objects.filter(session=session).count()
    Session.objects.filter(pk=session.pk).update(archived_at=timezone.now() - timedelta(seconds=5))

    app, queue, send = _kill_mid_job(
        "retention_app.enforce_retention", project, tmp_path, expect_marker=str(session.pk)
    )
    wait_until(lambda: not _locked(session), tmp_path / "celery.log")
    assert Session.objects.filter(pk=session.pk).exists()
    assert Event.objects.filter(session=session).count() == events_before
    assert not SessionTombstone.objects.exists()

    (tmp_path / "next").mkdir()
    with celery_processes(queue, tmp_path / "next") as log:
        wait_until(lambda: "ready." in log.read_text(), log)
        app.send_task("retention_app.enforce_retention", **send)
        wait_until(lambda: not Session.objects.filter(pk=session.pk).exists(), log, 120)
    assert not Event.objects.filter(session_id=session.pk).exists()
    tomb = SessionTombstone.objects.get(session_id=session.pk)
    assert tomb.events_deleted == events_before


def test_a_worker_killed_mid_batch_deletion_leaves_every_session_whole_and_the_next_run_deletes_them(
    transactional_db, project, tmp_path
):
    """The set-based path (one DELETE for a batch's sessions): killed after its writes, before
    the commit, none of the batch's sessions has lost an event, none has a tombstone."""
    save_policy(project, {**QUICK, "compact_after": None}, actor=SYSTEM)
    sessions = []
    for _ in range(3):
        session = make_session(project)
        append(session, conversation(LARGE // 4))
        session.refresh_from_db()
        sessions.append(archived(session))
    ids = [s.pk for s in sessions]
    Session.objects.filter(pk__in=ids).update(archived_at=timezone.now() - timedelta(seconds=5))
    counts = {s.pk: Event.objects.filter(session=s).count() for s in sessions}

    app, queue, send = _kill_mid_job(
        "retention_app.enforce_retention",
        project,
        tmp_path,
        expect_marker=",".join(sorted(str(pk) for pk in ids)),
    )
    wait_until(lambda: not any(_locked(s) for s in sessions), tmp_path / "celery.log")
    assert Session.objects.filter(pk__in=ids).count() == 3
    assert {s.pk: Event.objects.filter(session=s).count() for s in sessions} == counts
    assert not SessionTombstone.objects.exists()

    (tmp_path / "next").mkdir()
    with celery_processes(queue, tmp_path / "next") as log:
        wait_until(lambda: "ready." in log.read_text(), log)
        app.send_task("retention_app.enforce_retention", **send)
        wait_until(lambda: not Session.objects.filter(pk__in=ids).exists(), log, 120)
    assert not Event.objects.filter(session_id__in=ids).exists()
    tombs = {t.session_id: t.events_deleted for t in SessionTombstone.objects.all()}
    assert tombs == counts


def _locked(session) -> bool:
    """Whether some transaction still holds the session's row (the killed worker's backend
    until PostgreSQL sees its socket close)."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM sessions_app_session WHERE id = %s FOR UPDATE SKIP LOCKED",
            [session.pk],
        )
        return cursor.fetchone() is None


def test_beat_sends_both_jobs_and_a_worker_runs_them(transactional_db, project, tmp_path):
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    save_policy(project, QUICK, actor=SYSTEM)
    session = make_session(project)
    append(session, conversation(30))
    closed(session)
    queue = f"sb-retention-{uuid.uuid4().hex[:12]}"
    every, _ = IntervalSchedule.objects.get_or_create(every=1, period="seconds")
    for name in ("retention_app.compact_sessions", "retention_app.enforce_retention"):
        PeriodicTask.objects.update_or_create(
            name=f"test {name}",
            defaults={
                "task": name,
                "interval": every,
                "queue": queue,
                "kwargs": f'{{"project_ids": [{project.pk}]}}',
            },
        )
    with celery_processes(queue, tmp_path, beat=True) as log:
        wait_until(lambda: Compaction.objects.filter(session=session).exists(), log, 90)
    run = RetentionRun.objects.get(job="compact_sessions")
    assert run.compacted == 1 and run.status == "succeeded" and run.trigger == "beat"
