"""bench/worker_stop.py's baseline: the project's Celery app with kombu's stock filesystem
transport and Celery's stock timer, as before config/celery_shutdown.py."""

from config.celery import app

app.conf.update(broker_transport=None, worker_timer="celery.utils.timer2:Timer")
