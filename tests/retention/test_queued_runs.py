"""A run the page queues (services.jobs.request_runs) is the one the worker's task records:
queued, then running, then finished; a task delivered again after the run ended does nothing."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from retention_app.models import RetentionRun, RunStatus
from retention_app.services.jobs import run_job_for_project
from retention_app.services.policies import save_policy
from retention_app.tasks import compact_sessions
from sessions_app.models import Event
from tests.factories import make_session
from tests.retention.helpers import SYSTEM, append, closed, conversation
from tests.retention.test_jobs_celery import QUICK

pytestmark = pytest.mark.django_db


def test_the_task_runs_under_the_queued_run_and_a_second_delivery_changes_nothing(project):
    save_policy(project, QUICK, actor=SYSTEM)
    with time_machine.travel(timezone.now() - timedelta(days=1)):
        session = make_session(project)
        append(session, conversation(30))
        closed(session)
    queued = RetentionRun.objects.create(
        project=project, job="compact_sessions", trigger="user:ann", status=RunStatus.QUEUED
    )
    summary = compact_sessions.run(project_ids=[project.pk], trigger="user:ann", run_id=queued.pk)
    assert summary["runs"] == [queued.pk]
    queued.refresh_from_db()
    assert queued.status == RunStatus.SUCCEEDED and queued.compacted == 1
    assert queued.finished_at is not None and RetentionRun.objects.count() == 1
    events = Event.objects.count()

    # Redelivered (acks_late after a lost worker, say): the ended run is left alone.
    assert run_job_for_project("compact_sessions", project.pk, run_id=queued.pk) is None
    assert RetentionRun.objects.count() == 1 and Event.objects.count() == events


def test_a_queued_run_of_another_project_is_not_taken(project):
    from tests.factories import make_project

    other = make_project()
    queued = RetentionRun.objects.create(
        project=other, job="compact_sessions", status=RunStatus.QUEUED
    )
    assert run_job_for_project("compact_sessions", project.pk, run_id=queued.pk) is None
    queued.refresh_from_db()
    assert queued.status == RunStatus.QUEUED
