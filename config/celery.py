import os

from celery import Celery
from celery.signals import task_postrun, task_prerun

from core import logging as request_logging
from core import metrics

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("switchboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Job runs and durations (core.metrics) and the task id on every line a job logs (core.logging).
# weak=False: the receivers are module functions, kept alive anyway; this states it.
task_prerun.connect(metrics.job_started, weak=False)
task_prerun.connect(request_logging.task_started, weak=False)
task_postrun.connect(metrics.job_finished, weak=False)
task_postrun.connect(request_logging.task_finished, weak=False)
