"""The periodic jobs are declared in settings (CELERY_BEAT_SCHEDULE) and installed by
django-celery-beat's DatabaseScheduler when beat starts: the outbox relay, the webhook delivery
job and the deadline job."""

import os

from django.conf import settings
from django_celery_beat.models import PeriodicTask

JOBS = {"core.relay_outbox", "core.deliver_webhooks", "tasks_app.expire_step_deadlines"}


def declared() -> dict[str, int]:
    return {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}


def test_settings_declare_the_relay_and_the_deadline_job():
    schedule = declared()
    assert set(schedule) >= JOBS
    if "SWITCHBOARD_OUTBOX_RELAY_SECONDS" not in os.environ:
        assert schedule["core.relay_outbox"] == 10  # seconds
    if "SWITCHBOARD_DEADLINE_CHECK_SECONDS" not in os.environ:
        assert schedule["tasks_app.expire_step_deadlines"] == 30
    if "SWITCHBOARD_WEBHOOK_POLL_SECONDS" not in os.environ:
        assert schedule["core.deliver_webhooks"] == 5


def test_the_database_scheduler_installs_both_when_beat_starts(transactional_db):
    from django_celery_beat.schedulers import DatabaseScheduler

    from config.celery import app

    assert not PeriodicTask.objects.filter(task__in=JOBS).exists()
    # What beat does when it starts: the schedule declared in settings lands in its tables.
    scheduler = DatabaseScheduler(app=app)
    installed = {t.task: t for t in PeriodicTask.objects.filter(task__in=JOBS)}
    assert set(installed) == JOBS
    for name in JOBS:
        task = installed[name]
        assert task.enabled, name
        assert (task.interval.every, task.interval.period) == (declared()[name], "seconds"), name
    # And beat ticks over them from there.
    assert {entry.task for entry in scheduler.schedule.values()} >= JOBS
    # Starting again (a restart, a second beat) does not install them twice.
    DatabaseScheduler(app=app)
    assert PeriodicTask.objects.filter(task__in=JOBS).count() == len(JOBS)


def test_beat_sends_the_webhook_job_to_the_webhook_queue(transactional_db, settings):
    from django_celery_beat.schedulers import DatabaseScheduler

    from config.celery import app

    DatabaseScheduler(app=app)
    task = PeriodicTask.objects.get(task="core.deliver_webhooks")
    assert task.queue == settings.SWITCHBOARD_WEBHOOK_QUEUE
