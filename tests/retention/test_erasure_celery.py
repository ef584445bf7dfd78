"""Erasure on a real Celery worker (issue 28 §2, invariant 9): kill -9 of the worker in the
middle of a batch leaves every session either erased (410) or whole and readable, never half;
the next run finishes the erasure and the receipt counts every event once."""

import os
import signal
import uuid
from unittest import mock

import psutil
import pytest

from retention_app.erasure_queries import erasure_dict
from retention_app.models import ErasedObject, ErasureRequest, ErasureStatus, ErasureTarget
from retention_app.services.erasure import request_erasure
from sessions_app.models import Event, Session
from tests.conftest import ApiClient
from tests.factories import make_api_key, make_session
from tests.retention.helpers import SYSTEM, append, conversation
from tests.servers import celery_processes, wait_until

pytestmark = [pytest.mark.requires_redis("erasure on Celery"), pytest.mark.slow]

EVENTS = 3_000


def _worker(queue: str) -> psutil.Process:
    (worker,) = [
        p
        for p in psutil.Process().children(recursive=True)
        if queue in " ".join(p.cmdline()) and "worker" in p.cmdline()
    ]
    return worker


def _locked(session_ids) -> bool:
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM (SELECT 1 FROM sessions_app_session WHERE id = ANY(%s)"
            " FOR UPDATE SKIP LOCKED) s",
            [list(session_ids)],
        )
        (free,) = cursor.fetchone()
    return free < Session.objects.filter(pk__in=session_ids).count()


def test_a_worker_killed_mid_erasure_leaves_nothing_half_erased_and_a_rerun_finishes(
    transactional_db, project, tmp_path
):
    from config.celery import app

    sessions = []
    for i in range(3):
        session = make_session(project, external_id=f"subject-9/{i}", metadata={"user": "9"})
        append(session, conversation(EVENTS, seed=i))
        sessions.append(session)
    bystander = make_session(project, external_id="other/1")
    append(bystander, conversation(50))
    counts = {s.pk: Event.objects.filter(session=s).count() for s in sessions}
    with mock.patch("retention_app.services.erasure.current_app.send_task"):
        erasure = request_erasure(project, {"external_id_prefix": "subject-9/"}, actor=SYSTEM)
    api = ApiClient(make_api_key(project)[1])

    queue = f"sb-erasure-{uuid.uuid4().hex[:12]}"
    marker = tmp_path / "marker"
    # One session per batch; the second batch is held open and killed.
    send = {"kwargs": {"erasure_id": str(erasure.pk), "batch_events": EVENTS}, "queue": queue}
    with celery_processes(
        queue,
        tmp_path,
        app="tests.retention.slow_erasure_celery",
        ERASURE_MARKER=str(marker),
        ERASURE_HOLD_BATCH="2",
        ERASURE_HOLD_SECONDS="60",
    ) as log:
        wait_until(lambda: "ready." in log.read_text(), log)
        app.send_task("retention_app.erase_subject", **send)
        wait_until(marker.exists, log, timeout=120)
        held = marker.read_text().split(",")
        worker = _worker(queue)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
    wait_until(lambda: not _locked(counts), tmp_path / "celery.log")

    # Each session is either erased (gone, 410) or whole and readable: never part of it.
    erased, whole = [], []
    for session in sessions:
        response = api.get(f"/sessions/{session.pk}/events", {"limit": 1000})
        if Session.objects.filter(pk=session.pk).exists():
            assert response.status_code == 200
            assert Event.objects.filter(session=session).count() == counts[session.pk]
            whole.append(session.pk)
        else:
            assert response.status_code == 410, response.content
            assert response.json()["error"]["detail"]["erasure_id"] == str(erasure.pk)
            assert not Event.objects.filter(session_id=session.pk).exists()
            erased.append(session.pk)
    assert len(erased) == 1 and len(whole) == 2
    assert set(held) <= {str(pk) for pk in whole}  # the killed batch's session rolled back
    erasure.refresh_from_db()
    assert erasure.status == ErasureStatus.RUNNING
    assert erasure_dict(erasure)["counts"]["events"] == counts[erased[0]]
    assert (
        ErasedObject.objects.filter(erasure=erasure, kind__in=["event", "fact"]).count()
        == (counts[erased[0]])
    )

    (tmp_path / "next").mkdir()
    with celery_processes(queue, tmp_path / "next") as log:
        wait_until(lambda: "ready." in log.read_text(), log)
        app.send_task("retention_app.erase_subject", **send)
        wait_until(
            lambda: ErasureRequest.objects.get(pk=erasure.pk).status == ErasureStatus.DONE,
            log,
            120,
        )
    erasure.refresh_from_db()
    assert not Session.objects.filter(pk__in=counts).exists()
    assert not Event.objects.filter(session_id__in=list(counts)).exists()
    assert erasure.counts["sessions"] == 3
    assert erasure.counts["events"] == sum(counts.values())
    assert ErasedObject.objects.filter(erasure=erasure, kind__in=["event", "fact"]).count() == sum(
        counts.values()
    )
    assert ErasureTarget.objects.filter(erasure=erasure, erased_at__isnull=True).count() == 0
    assert Event.objects.filter(session=bystander).count() == 50
