"""Beat schedule for tasks_app.expire_step_deadlines: a django_celery_beat PeriodicTask.

Kept in the database (the project runs beat with the DatabaseScheduler) rather than in
CELERY_BEAT_SCHEDULE, so the task app owns its job and admins can change the interval or pause
it in the admin without a deploy. Every 30 seconds: a step's deadline is honoured to within
that. Reversible: the reverse removes the PeriodicTask (the shared interval row is kept).
"""

from django.db import migrations
from django.utils import timezone

TASK_NAME = "tasks_app.expire_step_deadlines"
ENTRY_NAME = "tasks_app: expire step deadlines"
EVERY_SECONDS = 30


def add_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    interval, _ = IntervalSchedule.objects.get_or_create(every=EVERY_SECONDS, period="seconds")
    PeriodicTask.objects.update_or_create(
        name=ENTRY_NAME,
        defaults={
            "task": TASK_NAME,
            "interval": interval,
            "kwargs": "{}",
            "enabled": True,
            "description": "Fail waiting steps whose deadline has passed (timeout errors).",
        },
    )
    # Historical models skip PeriodicTask.save()'s change signal: tell a running beat ourselves.
    PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    PeriodicTask.objects.filter(name=ENTRY_NAME).delete()
    PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_app", "0002_task_history_append_only"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(add_schedule, remove_schedule)]
