"""Retention's artifact_max_age on real Celery workers: a worker's enforce run deletes the old
versions (their files removed once it commits, the deletion event in the log) and keeps the new;
kill -9 of a worker in the middle of it leaves every version whole (row, file, no event), and
the next run finishes it."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from retention_app.models import RetentionRun
from retention_app.services.policies import save_policy
from sessions_app.models import Artifact, Event, EventKind, Session
from sessions_app.services.artifacts import artifact_storage
from tests.factories import make_artifact, make_session
from tests.retention.helpers import SYSTEM, closed
from tests.retention.test_jobs_celery import QUICK, _kill_mid_job, _locked
from tests.servers import celery_processes, wait_until

pytestmark = [pytest.mark.requires_redis("retention jobs on Celery"), pytest.mark.slow]

HOUR = 3600
POLICY = {**QUICK, "compact_after": None, "delete_after": None, "artifact_max_age": HOUR}


def _old_and_new(project) -> tuple[Session, list[Artifact], Artifact]:
    session = make_session(project)
    old = [make_artifact(session, "report", b"old %d" % i) for i in range(3)]
    new = make_artifact(session, "report", b"new")
    Artifact.objects.filter(pk__in=[a.pk for a in old]).update(
        created_at=timezone.now() - timedelta(hours=2)
    )
    return closed(session), old, new


def _deletions(session: Session) -> list[dict]:
    return [
        e.content
        for e in Event.objects.filter(session=session, kind=EventKind.ARTIFACT).order_by("seq")
        if e.content["action"] == "delete"
    ]


def _stored(artifact: Artifact) -> bool:
    return artifact_storage().exists(artifact.storage_key)


def test_a_worker_deletes_the_old_versions_and_their_files(transactional_db, project, tmp_path):
    from config.celery import app

    save_policy(project, POLICY, actor=SYSTEM)
    session, old, new = _old_and_new(project)
    assert all(_stored(a) for a in [*old, new])
    queue = f"sb-retention-{uuid.uuid4().hex[:12]}"
    with celery_processes(queue, tmp_path) as log:
        wait_until(lambda: "ready." in log.read_text(), log)
        app.send_task(
            "retention_app.enforce_retention",
            kwargs={"project_ids": [project.pk], "trigger": "test"},
            queue=queue,
        )
        wait_until(lambda: RetentionRun.objects.filter(finished_at__isnull=False).exists(), log)
    run = RetentionRun.objects.get()
    assert (run.status, run.artifacts_deleted) == ("succeeded", 3)
    assert run.artifact_bytes_freed == sum(a.size for a in old)
    assert not Artifact.objects.filter(pk__in=[a.pk for a in old], deleted_at__isnull=True)
    assert not any(_stored(a) for a in old)  # removed by the worker once its batch committed
    assert _stored(new) and Artifact.objects.get(pk=new.pk).deleted_at is None
    assert _deletions(session) == [{"action": "delete", "name": "report", "versions": [1, 2, 3]}]


def test_a_worker_killed_mid_expiry_leaves_every_version_whole_and_the_next_run_finishes(
    transactional_db, project, tmp_path
):
    save_policy(project, POLICY, actor=SYSTEM)
    session, old, new = _old_and_new(project)
    head = session.head_seq

    app, queue, send = _kill_mid_job(
        "retention_app.enforce_retention", project, tmp_path, expect_marker=str(session.pk)
    )
    # The kill landed after the writes, before the commit: all of it rolled back.
    wait_until(lambda: not _locked(session), tmp_path / "celery.log")
    session.refresh_from_db()
    assert session.head_seq == head and not _deletions(session)
    assert not Artifact.objects.filter(deleted_at__isnull=False).exists()
    assert all(_stored(a) for a in [*old, new])

    (tmp_path / "next").mkdir()
    with celery_processes(queue, tmp_path / "next") as log:
        wait_until(lambda: "ready." in log.read_text(), log)
        app.send_task("retention_app.enforce_retention", **send)
        wait_until(lambda: Artifact.objects.filter(deleted_at__isnull=False).count() == 3, log, 120)
        wait_until(lambda: not any(_stored(a) for a in old), log)
    assert _stored(new)
    assert _deletions(session) == [{"action": "delete", "name": "report", "versions": [1, 2, 3]}]
