"""The digest job on a real Celery worker fired by a real beat (DatabaseScheduler): a project's
digest is posted to its chat webhook (a real loopback receiver) once, and not again while the
waiting list stays the same."""

import uuid

import pytest
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from core.actors import Actor
from core.models import Role
from handoffs_app.models import HandoffSettings
from handoffs_app.services.digest import update_digest_settings
from handoffs_app.services.handoffs import request_handoff
from tests.factories import make_member, make_session
from tests.servers import celery_processes, wait_until
from tests.webhooks.receiver import receiver

from .helpers import QUESTION

pytestmark = [pytest.mark.slow, pytest.mark.requires_redis("Celery broker")]


def test_beat_posts_a_projects_digest_once(transactional_db, project, tmp_path):
    queue = f"sb-digest-test-{uuid.uuid4().hex[:12]}"
    PeriodicTask.objects.update(enabled=False)
    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period="seconds")
    PeriodicTask.objects.create(
        name=f"digests for {queue}",
        task="handoffs_app.send_digests",
        interval=every_second,
        queue=queue,
        kwargs="{}",
    )
    session = make_session(project, agent="refunds")
    request_handoff(
        session,
        kind="question",
        reason="Ship to the old address?",
        payload=QUESTION,
        actor=Actor.system("tests-agent"),
    )
    with receiver() as chat:
        update_digest_settings(
            project.pk,
            user=make_member(project, Role.ADMIN),
            emails=[],
            chat_url=chat.url,
            interval_seconds=15 * 60,
        )
        with celery_processes(queue, tmp_path, beat=True) as log:
            wait_until(lambda: len(chat.requests) >= 1, log)
            runs = log.read_text().count("handoffs_app.send_digests[")
            # Beat keeps firing the job every second: the project is not due again for 15 min.
            wait_until(lambda: log.read_text().count("handoffs_app.send_digests[") >= runs + 6, log)
        [request] = chat.requests
    assert "1 handoff is waiting for a person" in request.json["text"]
    assert "Ship to the old address?" in request.json["text"]
    row = HandoffSettings.objects.get(project=project)
    assert row.digest_chat_sent_state and row.digest_last_error == ""
