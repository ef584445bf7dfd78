"""Idempotency keys and a fork's external_id under racing OS processes (tests.multiproc).

* One key, different events, sent at once: the constraint on (session, idempotency_key) lets
  one write; the others meet it, look again and find an event that is not theirs, so they
  answer 409 idempotency_key_reused naming the winner's seq, never 200 "replayed" with another
  event (services.events._refuse_changed_replays, on the retry after the IntegrityError).
* A key a fork inherited, retried by several processes at once: all are answered with the
  parent's event, and the fork's log holds nothing of it.
* One fork asked for by several processes with one external_id: one fork, the others 200 with it.

The "behind a lock" tests make the race certain: the holder writes in a transaction left open
until every racer has made its look-up and waits on a lock the holder holds (the session's row
or the parent's), so each look-up misses and each racer meets the unique constraint after the
commit.
"""

import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from django.db import connection, transaction

from core.actors import Actor
from core.models import AuditEntry
from sessions_app.models import Event, Session
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.sessions import open_fork
from tests.factories import make_api_key, make_session
from tests.multiproc import ProcessPool, barrier

pytestmark = [pytest.mark.slow]

PROCESSES = 4
ROUNDS = 6


@pytest.fixture(scope="module")
def racers(django_db_setup):
    with ProcessPool(PROCESSES) as pool:
        yield pool


def post_each_at_once(raw_key: str, posts: list[tuple[str, dict]]) -> list[tuple[int, dict]]:
    """In a child process: for each (path, body), wait for the others, then POST it."""
    from tests.conftest import ApiClient

    client = ApiClient(raw_key)
    answers = []
    for path, body in posts:
        barrier().wait()
        response = client.post(path, body)
        answers.append((response.status_code, response.json()))
    return answers


def _behind_lock(pool, args_per_process, *, hold, waiting_in: str, timeout: float = 30):
    """hold() in a transaction committed once every racer waits on a lock in a statement
    containing `waiting_in` (a queue behind the holder: the first waits on it, the others on
    the first); returns hold()'s result and the racers'."""
    params = connection.get_connection_params()
    with ThreadPoolExecutor(1) as executor:
        with transaction.atomic():
            held = hold()
            running = executor.submit(pool.run, post_each_at_once, args_per_process)
            deadline = time.monotonic() + timeout
            with psycopg.connect(**params, autocommit=True) as watcher:
                while True:
                    (waiting,) = watcher.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND wait_event_type = 'Lock' AND strpos(query, %s) > 0",
                        (waiting_in,),
                    ).fetchone()
                    if waiting == pool.count:
                        break
                    assert not running.done(), running.result()
                    assert time.monotonic() < deadline, f"{waiting} of {pool.count} waited"
                    time.sleep(0.02)
        return held, running.result()


def _note(by: object, key: str) -> dict:
    return {"kind": "note", "content": {"by": by}, "idempotency_key": key}


# --- (d) one key, different events ----------------------------------------------------------


def test_racers_reusing_one_key_for_different_events_get_one_write_and_409s(
    transactional_db, project, racers
):
    session = make_session(project)
    raw_key = make_api_key(project)[1]
    path = f"/sessions/{session.pk}/events"
    keys = [f"k{n}" for n in range(ROUNDS)]

    per_process = racers.run(
        post_each_at_once,
        [(raw_key, [(path, {"events": [_note(i, k)]}) for k in keys]) for i in range(PROCESSES)],
    )

    for n, key in enumerate(keys):
        answers = [answers[n] for answers in per_process]
        assert sorted(status for status, _ in answers) == [201] + [409] * (PROCESSES - 1), answers
        (event,) = Event.objects.filter(session=session, idempotency_key=key)
        (winner,) = [i for i, (status, _) in enumerate(answers) if status == 201]
        assert event.content == {"by": winner}
        for status, body in answers:
            if status == 409:
                assert body["error"]["code"] == "idempotency_key_reused"
                assert body["error"]["detail"]["seq"] == event.seq
                assert body["error"]["detail"]["changed"] == ["content"]
    session.refresh_from_db()
    assert session.head_seq == ROUNDS == Event.objects.filter(session=session).count()


def test_racers_that_all_miss_an_uncommitted_key_tell_a_retry_from_a_reuse(
    transactional_db, project, racers
):
    session = make_session(project)
    raw_key = make_api_key(project)[1]
    path = f"/sessions/{session.pk}/events"

    def write_held():
        (event,) = append_events(
            session, [EventDraft(**_note("held", "k"))], actor=Actor.system("t")
        ).events
        return event

    # Two racers retry the held event; two send another event with its key.
    bodies = [{"events": [_note("held" if i < 2 else i, "k")]} for i in range(PROCESSES)]
    held, per_process = _behind_lock(
        racers,
        [(raw_key, [(path, body)]) for body in bodies],
        hold=write_held,
        waiting_in='UPDATE "sessions_app_session"',
    )

    answers = [answers[0] for answers in per_process]
    assert [status for status, _ in answers] == [200, 200, 409, 409], answers
    for status, body in answers:
        if status == 200:
            assert body["events"] == [
                {
                    "seq": held.seq,
                    "kind": "note",
                    "tier": "transient",
                    "created_at": held.created_at.isoformat(),
                    "replayed": True,
                }
            ]
        else:
            assert body["error"]["detail"]["seq"] == held.seq
    assert list(Event.objects.filter(session=session).values_list("seq", flat=True)) == [1]


# --- (a) a key a fork inherited -------------------------------------------------------------


def test_racers_retrying_an_inherited_key_in_a_fork_are_answered_with_the_parents_event(
    transactional_db, project, racers
):
    parent = make_session(project)
    inherited = append_events(
        parent, [EventDraft(**_note("parent", "p1"))], actor=Actor.system("t")
    ).events[0]
    append_events(parent, [EventDraft(kind="note")], actor=Actor.system("t"))
    fork, _ = open_fork(parent, at_seq=2, actor=Actor.system("t"))
    raw_key = make_api_key(project)[1]
    path = f"/sessions/{fork.pk}/events"
    # Each round: the inherited key and a new one, the same batch from every process.
    batches = [{"events": [_note("parent", "p1"), _note(n, f"new-{n}")]} for n in range(ROUNDS)]

    per_process = racers.run(
        post_each_at_once, [(raw_key, [(path, b) for b in batches])] * PROCESSES
    )

    for n in range(ROUNDS):
        answers = [answers[n] for answers in per_process]
        assert sorted(status for status, _ in answers) == [200] * (PROCESSES - 1) + [201], answers
        firsts = {(e["seq"], e["replayed"]) for _, body in answers for e in body["events"][:1]}
        assert firsts == {(inherited.seq, True)}
    own = Event.objects.filter(session=fork).order_by("seq")
    assert [e.idempotency_key for e in own] == [f"new-{n}" for n in range(ROUNDS)]
    assert [e.seq for e in own] == list(range(3, 3 + ROUNDS))


# --- A fork's external_id -------------------------------------------------------------------


def test_racers_forking_with_one_external_id_share_one_fork(transactional_db, project, racers):
    parent = make_session(project)
    append_events(parent, [EventDraft(kind="note")] * 3, actor=Actor.system("t"))
    raw_key = make_api_key(project)[1]
    path = f"/sessions/{parent.pk}/fork"
    external_ids = [f"branch-{n}" for n in range(ROUNDS)]

    per_process = racers.run(
        post_each_at_once,
        [(raw_key, [(path, {"at_seq": 2, "external_id": e}) for e in external_ids])] * PROCESSES,
    )

    for n, external_id in enumerate(external_ids):
        answers = [answers[n] for answers in per_process]
        assert sorted(status for status, _ in answers) == [200] * (PROCESSES - 1) + [201], answers
        (fork,) = Session.objects.filter(project=project, external_id=external_id)
        assert {body["id"] for _, body in answers} == {str(fork.pk)}
        assert (fork.parent_id, fork.fork_seq) == (parent.pk, 2)
        assert AuditEntry.objects.filter(action="session.fork", target_id=str(fork.pk)).count() == 1
    assert Session.objects.filter(parent=parent).count() == ROUNDS


def test_racers_that_all_miss_an_uncommitted_fork_answer_with_it_once_committed(
    transactional_db, project, racers
):
    parent = make_session(project)
    append_events(parent, [EventDraft(kind="note")] * 3, actor=Actor.system("t"))
    raw_key = make_api_key(project)[1]
    body = {"at_seq": 2, "external_id": "branch-held"}

    def fork_held():
        fork, created = open_fork(
            parent, at_seq=2, actor=Actor.system("t"), external_id="branch-held"
        )
        assert created
        return fork

    held, per_process = _behind_lock(
        racers,
        [(raw_key, [(f"/sessions/{parent.pk}/fork", body)])] * PROCESSES,
        hold=fork_held,
        waiting_in="FOR NO KEY UPDATE",  # the parent's row, locked by the held fork
    )

    assert [(s, b["id"]) for ((s, b),) in per_process] == [(200, str(held.pk))] * PROCESSES
    assert list(Session.objects.filter(parent=parent)) == [held]
    assert AuditEntry.objects.filter(action="session.fork").count() == 1
