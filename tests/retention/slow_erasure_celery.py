"""The Celery app with an erasure batch held open before its commit (tests only).

`celery -A tests.retention.slow_erasure_celery worker`: the batch numbered $ERASURE_HOLD_BATCH
(1 = the first) writes the ids of its sessions to $ERASURE_MARKER once its deletes are done,
and sleeps $ERASURE_HOLD_SECONDS before its transaction commits: a test kills the worker there
with SIGKILL, in the middle of the erasure. Earlier batches commit as usual.
"""

import os
import time
from pathlib import Path

import django

django.setup()

import retention_app.services.erasure as erasure  # noqa: E402
from config.celery import app  # noqa: E402

_erase = erasure.erase_sessions_locked
_calls = [0]


def _slow_erase(request, sessions):  # type: ignore[no-untyped-def]
    result = _erase(request, sessions)
    _calls[0] += 1
    if _calls[0] == int(os.environ.get("ERASURE_HOLD_BATCH", "1")):
        marker = os.environ.get("ERASURE_MARKER")
        if marker:
            Path(marker).write_text(",".join(sorted(str(s.pk) for s in sessions)))
        time.sleep(float(os.environ.get("ERASURE_HOLD_SECONDS", "60")))
    return result


erasure.erase_sessions_locked = _slow_erase  # type: ignore[assignment]

__all__ = ["app"]
