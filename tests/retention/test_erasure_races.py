"""Erasure racing writers, in separate processes (issue 28 §2): appends to a matching session
and forks of it, while the erasure runs. An append either lands before the erasure's batch and
is erased with the session, or is refused (410 erased); a fork either is made before and is
erased too, or is refused; nothing of the subject is left readable."""

import time
from unittest import mock

import pytest

from retention_app.models import ErasedObject, ErasureStatus, ErasureTarget
from retention_app.services.erasure import request_erasure
from sessions_app.models import Event, Session, Snapshot
from sessions_app.services.events import EventDraft, append_events
from tests.factories import make_api_key, make_session
from tests.multiproc import ProcessPool, barrier
from tests.retention.helpers import SYSTEM

pytestmark = pytest.mark.slow

PROCESSES = 3


@pytest.fixture(scope="module")
def racers(django_db_setup):
    with ProcessPool(PROCESSES) as pool:
        yield pool


def erase_append_or_fork(raw_key: str, session_id: str, erasure_id: str, role: str, delay: float):
    """In a child: run the erasure after `delay`, or append (or fork) to the session until
    refused. Every answer, in order."""
    from tests.conftest import ApiClient

    barrier().wait()
    if role == "erase":
        from uuid import UUID

        from retention_app.services.erasure import run_erasure

        time.sleep(delay)
        return [("erase", run_erasure(UUID(erasure_id)).status)]
    client = ApiClient(raw_key)
    answers = []
    for i in range(400):
        if role == "append":
            body = {"events": [{"kind": "message", "role": "user", "content": {"text": f"m{i}"}}]}
            response = client.post(f"/sessions/{session_id}/events", body)
            answers.append(("append", response.status_code, None))
        else:
            response = client.post(f"/sessions/{session_id}/fork", {"at_seq": 1})
            made = response.json().get("id") if response.status_code == 201 else None
            answers.append(("fork", response.status_code, made))
        if response.status_code not in (200, 201):
            error = response.json()["error"]
            answers[-1] = (*answers[-1][:2], error["code"], error["detail"].get("erasure_id"))
            break
    return answers


def test_an_erasure_racing_appends_and_forks_leaves_nothing_readable(
    transactional_db, project, racers
):
    _, raw_key = make_api_key(project)
    outcomes = set()
    for delay in (0.0, 0.2, 0.5):
        session = make_session(project, agent="racer", metadata={"user": "race"})
        append_events(session, [EventDraft(kind="note", content={})] * 3, actor=SYSTEM)
        with mock.patch("retention_app.services.erasure.current_app.send_task"):
            erasure = request_erasure(
                project, {"metadata": {"key": "user", "value": "race"}}, actor=SYSTEM
            )
        (done,), appends, forks = racers.run(
            erase_append_or_fork,
            [
                (raw_key, str(session.pk), str(erasure.pk), role, delay)
                for role in ("erase", "append", "fork")
            ],
        )
        assert done == ("erase", ErasureStatus.DONE)
        for answers in (appends, forks):
            *accepted, last = answers
            # Accepted until the erasure, then refused as erased, naming this erasure.
            assert all(status in (200, 201) for _, status, *_ in accepted), accepted
            assert last[1:] == (410, "erased", str(erasure.pk)), last
        made = [answer[2] for answer in forks if answer[1] == 201]
        landed = sum(1 for answer in appends if answer[1] == 201)
        outcomes.add((landed > 0, len(made) > 0))
        # Every fork made before is erased with it; nothing of any of them is left.
        ids = [session.pk, *made]
        assert not Session.objects.filter(pk__in=ids).exists()
        assert not Event.objects.filter(session_id__in=ids).exists()
        assert not Snapshot.objects.filter(session_id__in=ids).exists()
        targets = ErasureTarget.objects.filter(erasure=erasure).values_list("session_id", flat=True)
        assert {str(pk) for pk in ids} <= {str(pk) for pk in targets}
        erased_events = ErasedObject.objects.filter(erasure=erasure, kind__in=["event", "fact"])
        # The appends that landed were erased (each hashed in the receipt), with the first 3.
        assert erased_events.filter(ref__startswith=str(session.pk)).count() == 3 + landed
    print(sorted(outcomes))  # -rP: which orders the rounds met
    assert (True, True) in outcomes
