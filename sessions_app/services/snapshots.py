"""Automatic snapshots off the request: one background thread per process takes them.

An append that crosses an interval boundary hands (session, boundaries) to this process's
snapshot thread after commit, and its response does not wait for the fold and the insert (a
third of a 100-event batch's time when taken inside the request). Reads stay bounded
(invariant 5): state folds from the nearest snapshot, so a snapshot still waiting only adds
events to fold, and the backlog is capped: with SWITCHBOARD_SNAPSHOT_BACKLOG jobs waiting, the
appending request takes its own snapshots as before, so the newest snapshot never lags the log
by more than that many jobs per process. A job a crash loses leaves one boundary without its
snapshot: state there folds from the previous one (two intervals), as it did when a crash fell
between the commit and the in-request snapshot. The thread is started lazily, again in a forked
child, and drained at exit (`drain` also serves tests that look for the snapshots).
"""

import atexit
import contextlib
import logging
import os
import queue
import threading
import time
from typing import Any

from django.conf import settings
from django.db import connection

from .state import ensure_snapshots

logger = logging.getLogger(__name__)

_jobs: "queue.Queue[tuple[Any, list[int]]]" = queue.Queue()
_lock = threading.Lock()
_thread: threading.Thread | None = None
_pid = 0


def _work() -> None:
    while True:
        session_id, seqs = _jobs.get()
        try:
            ensure_snapshots(session_id, seqs)
        except Exception:
            # The events are committed; a missing snapshot only lengthens the fold past it.
            logger.exception("automatic snapshot of session %s at %s failed", session_id, seqs)
        finally:
            # Back to the pool (as at the end of a request), so the thread holds no connection
            # while idle.
            with contextlib.suppress(Exception):
                connection.close()
            _jobs.task_done()


def _ensure_thread() -> None:
    global _thread, _pid, _jobs
    if _thread is not None and _pid == os.getpid() and _thread.is_alive():
        return
    with _lock:
        if _thread is not None and _pid == os.getpid() and _thread.is_alive():
            return
        if _pid != os.getpid():
            _jobs = queue.Queue()  # a forked child does not inherit its parent's thread
        _pid = os.getpid()
        _thread = threading.Thread(target=_work, name="switchboard-snapshots", daemon=True)
        _thread.start()


def schedule_snapshots(session_id: Any, seqs: list[int]) -> None:
    """After commit: snapshot `session_id` at `seqs`, in the background when enabled."""
    background = settings.SWITCHBOARD_SNAPSHOT_IN_BACKGROUND
    if not background or _jobs.unfinished_tasks >= settings.SWITCHBOARD_SNAPSHOT_BACKLOG:
        ensure_snapshots(session_id, seqs)
        return
    _ensure_thread()
    _jobs.put((session_id, list(seqs)))


def drain(timeout: float = 30.0) -> bool:
    """Wait until this process's waiting snapshots are taken; False if `timeout` ran out."""
    deadline = time.monotonic() + timeout
    with _jobs.all_tasks_done:
        while _jobs.unfinished_tasks:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _jobs.all_tasks_done.wait(left)
    return True


atexit.register(drain, 10.0)
