"""The Celery app with retention's per-session work held open (tests only).

`celery -A tests.retention.slow_celery worker`: after a session's compaction, deletion or
artifact expiry has done its writes, and before its transaction commits, the worker writes the session ids to
$RETENTION_MARKER and sleeps $RETENTION_HOLD_SECONDS: a test kills it there with SIGKILL, in
the middle of the job.
"""

import os
import time
from pathlib import Path

import django

django.setup()

import retention_app.services.jobs as jobs  # noqa: E402
from config.celery import app  # noqa: E402

_compact = jobs.compact_locked
_delete = jobs.delete_sessions_locked  # one session's deletion goes through it too
_expire = jobs.expire_versions_locked


def _hold(sessions) -> None:  # type: ignore[no-untyped-def]
    marker = os.environ.get("RETENTION_MARKER")
    if marker:
        Path(marker).write_text(",".join(sorted(str(session.pk) for session in sessions)))
    time.sleep(float(os.environ.get("RETENTION_HOLD_SECONDS", "60")))


def _slow_compact(session, **kwargs):  # type: ignore[no-untyped-def]
    result = _compact(session, **kwargs)
    _hold([session])
    return result


def _slow_delete(sessions, **kwargs):  # type: ignore[no-untyped-def]
    result = _delete(sessions, **kwargs)
    _hold(sessions)
    return result


def _slow_expire(session, **kwargs):  # type: ignore[no-untyped-def]
    result = _expire(session, **kwargs)
    _hold([session])
    return result


jobs.compact_locked = _slow_compact  # type: ignore[assignment]
jobs.delete_sessions_locked = _slow_delete  # type: ignore[assignment]
jobs.expire_versions_locked = _slow_expire  # type: ignore[assignment]

__all__ = ["app"]
