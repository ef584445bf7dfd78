"""Invariant 9 for the outbox relay: a notice committed with its change reaches the channel
layer even when the process that made the change dies between the commit and the send, and
concurrent relays send each row once.

Real OS processes on the test database: a child killed with SIGKILL right after its commit, a
real Celery worker (on a queue of its own) running core.relay_outbox, and two relays racing
(tests.multiproc). A GroupListener on the real Redis layer hears what a live page would.
"""

import os
import select
import signal
import subprocess
import sys
import time
import uuid

import pytest
from django.utils import timezone

from core.domain_events import RELAY_GRACE
from core.models import OutboxMessage
from core.realtime import session_group
from sessions_app.models import Session
from tests.factories import make_session
from tests.multiproc import run_in_processes
from tests.servers import ROOT, celery_processes, child_env, wait_until

from .outbox_children import relay_all_pending, relay_one

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

QUIET = 0.6


def read_line(process: subprocess.Popen, timeout: float = 60.0) -> str:
    """The child's next line of output; fails if none comes within `timeout` seconds."""
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    if not ready:
        process.kill()
        raise AssertionError(f"the child said nothing within {timeout}s")
    return process.stdout.readline().strip()


def test_a_row_whose_process_died_after_commit_is_relayed_by_the_celery_job(
    project, listen, tmp_path
):
    from config.celery import app

    session = make_session(project)
    heard = listen(session_group(session.pk))
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.core.outbox_children", "crash", str(session.pk)],
        cwd=ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert read_line(child) == "committed", child.stderr.read()
        os.kill(child.pid, signal.SIGKILL)  # after the commit, before the relay
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()

    # The change and its outbox row committed; nothing was sent.
    assert Session.objects.get(pk=session.pk).status == "paused"
    [row] = OutboxMessage.objects.filter(
        type="session.lifecycle", payload__session_id=str(session.pk)
    )
    assert row.relayed_at is None
    assert row.payload["to"] == "paused" and row.payload["actor"] == "doomed"
    assert heard.receive(timeout=QUIET) is None

    queue = f"sb-outbox-test-{uuid.uuid4().hex[:12]}"
    with celery_processes(queue, tmp_path) as log:
        # Send once the worker has declared its queue (the Redis transport drops a message
        # published to an exchange nothing is bound to yet), and once the row is past the
        # grace period in which an after-commit relay is presumed to be running.
        wait_until(lambda: "ready." in log.read_text(), log)
        wait_for = (row.created_at + RELAY_GRACE - timezone.now()).total_seconds() + 0.2
        time.sleep(max(0.0, wait_for))
        app.send_task("core.relay_outbox", queue=queue)
        wait_until(lambda: OutboxMessage.objects.get(pk=row.pk).relayed_at is not None, log)
    # The listener heard the lifecycle change, once. (The live-only notice of the lifecycle
    # event appended to the log died with the process: readers catch up from the log.)
    assert heard.receive_all(QUIET) == [row.payload]
    assert "Task core.relay_outbox" in log.read_text()


def make_unsent_rows(project, group: str, count: int) -> list[int]:
    rows = OutboxMessage.objects.bulk_create(
        OutboxMessage(
            project=project,
            type="test.outbox",
            groups=[group],
            payload={"type": "test.outbox", "n": n},
        )
        for n in range(count)
    )
    return [row.pk for row in rows]


def test_two_relays_at_once_send_each_row_exactly_once(project, listen):
    group = f"outbox-relay-test-{uuid.uuid4().hex[:12]}"
    heard = listen(group)
    ids = make_unsent_rows(project, group, 60)

    # Each child meets the other at its first send, each holding a batch of locked rows:
    # without SKIP LOCKED the second would wait on the first's rows and never arrive.
    sent = run_in_processes(relay_all_pending, [(7,), (7,)], timeout=120)

    assert sum(sent) == len(ids) and all(n > 0 for n in sent), sent
    assert not OutboxMessage.objects.filter(pk__in=ids, relayed_at__isnull=True).exists()
    numbers = [message["n"] for message in heard.receive_all(QUIET)]
    assert sorted(numbers) == list(range(len(ids)))  # every row, none twice


def test_two_after_commit_relays_of_one_row_send_it_once(project, listen):
    group = f"outbox-relay-test-{uuid.uuid4().hex[:12]}"
    heard = listen(group)
    [row_id] = make_unsent_rows(project, group, 1)

    outcomes = run_in_processes(relay_one, [(row_id,), (row_id,)])

    assert sorted(outcomes) == [False, True]
    assert OutboxMessage.objects.get(pk=row_id).relayed_at is not None
    assert heard.receive_all(QUIET) == [{"type": "test.outbox", "n": 0}]
