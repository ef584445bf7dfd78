"""Invariant 1 (and 3, 4 under contention): several OS processes write one session at once.

Each writer is a separate spawned interpreter with its own database connection (tests.multiproc),
half of them through the HTTP API, half through the service, all released by one barrier.
"""

import json
import random

import pytest
from django.test import Client

from sessions_app.actors import Actor
from sessions_app.errors import HeadSeqMismatch
from sessions_app.models import Event, Session, Snapshot
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import pause_session, resume_session
from tests.factories import make_session
from tests.multiproc import ProcessPool, barrier
from tests.sessions_app.naive import fold

pytestmark = [pytest.mark.slow]

WRITERS = 4


@pytest.fixture(scope="module")
def pool(django_db_setup):
    """WRITERS spawned interpreters shared by this module's races (start-up is paid once)."""
    with ProcessPool(WRITERS, env={"SWITCHBOARD_SNAPSHOT_EVERY": "7"}) as pool:
        yield pool


def _post_events(raw_key: str, session_id: str, body: dict) -> dict:
    response = Client().post(
        f"/api/v1/sessions/{session_id}/events", data=json.dumps(body),
        content_type="application/json", headers={"Authorization": f"Bearer {raw_key}"},
    )
    assert response.status_code in (200, 201), response.content
    return response.json()


# --- Child process bodies (module level: the children import them) --------------------------


def append_batches(
    session_id: str, raw_key: str | None, tag: str, sizes: list[int]
) -> list[list[int]]:
    """Append one batch per size; returns the seqs each batch was given."""
    session = Session.objects.get(pk=session_id)
    given: list[list[int]] = []
    for number, size in enumerate(sizes):
        events = []
        for n in range(size):
            if n % 3 == 1:
                events.append({"kind": "state", "content": {"writers": {tag: number}, "last": tag}})
            elif n % 3 == 2:
                events.append({"kind": "fact", "content": {"key": f"fact-{n}", "value": tag}})
            else:
                events.append({"kind": "note", "content": {"writer": tag, "batch": number}})
            events[-1]["tokens"] = 1
        if raw_key is not None:
            body = _post_events(raw_key, session_id, {"events": events})
            given.append([e["seq"] for e in body["events"]])
        else:
            drafts = [EventDraft(kind=e["kind"], content=e["content"], tokens=1) for e in events]
            result = append_events(session, drafts, actor=Actor.system(tag))
            given.append([e.seq for e in result.events])
        if tag == "w0" and number % 5 == 4:
            # Lifecycle events take seqs too, from the same counter, amid the appends.
            toggle = pause_session if number % 10 == 4 else resume_session
            toggle(session, actor=Actor.system(tag), reason="concurrent")
    return given


def send_keyed_batches(
    session_id: str, raw_key: str | None, batches: list[list[str]], passes: int
) -> dict[str, int]:
    """Send every batch `passes` times (retries); returns key -> seq as answered."""
    session = Session.objects.get(pk=session_id)
    answered: dict[str, int] = {}
    for _ in range(passes):
        for keys in batches:
            if raw_key is not None:
                body = _post_events(raw_key, session_id, {"events": [
                    {"kind": "note", "content": {"key": k}, "idempotency_key": k} for k in keys
                ]})
                pairs = [(k, e["seq"]) for k, e in zip(keys, body["events"], strict=True)]
            else:
                drafts = [EventDraft(kind="note", content={"key": k}, idempotency_key=k)
                          for k in keys]
                result = append_events(session, drafts, actor=Actor.system("retrier"))
                pairs = [(k, e.seq) for k, e in zip(keys, result.events, strict=True)]
            for key, seq in pairs:
                # A retry must be answered with the original, every time.
                assert answered.setdefault(key, seq) == seq, (key, answered[key], seq)
    return answered


def race_expected_head(session_id: str, base_head: int, rounds: int) -> list[str]:
    """Each round, every process appends 2 events expecting the same head; report who won."""
    session = Session.objects.get(pk=session_id)
    outcomes = []
    for round_number in range(rounds):
        barrier().wait()
        expected = base_head + 2 * round_number
        drafts = [EventDraft(kind="note", content={"round": round_number}) for _ in range(2)]
        try:
            append_events(session, drafts, actor=Actor.system("racer"),
                          expected_head_seq=expected)
            outcomes.append("won")
        except HeadSeqMismatch:
            outcomes.append("mismatch")
    return outcomes


# --- Tests ------------------------------------------------------------------------------------


def _assert_gap_free(session: Session) -> list[Event]:
    session.refresh_from_db()
    events = list(Event.objects.filter(session=session).order_by("seq"))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert session.head_seq == len(events)
    return events


def test_it_keeps_seqs_gap_free_with_concurrent_writer_processes(
    transactional_db, project, api_key, pool
):
    session = make_session(project)
    rng = random.Random(1)
    plans = [[rng.randint(1, 6) for _ in range(25)] for _ in range(WRITERS)]
    raw_key = api_key[1]
    given = pool.run(
        append_batches,
        [(str(session.pk), raw_key if i % 2 else None, f"w{i}", plans[i]) for i in range(WRITERS)],
    )

    events = _assert_gap_free(session)
    lifecycle = [e for e in events if e.kind == "lifecycle"]
    assert [e.content["to"] for e in lifecycle] == ["paused", "resumed"] * 2 + ["paused"]
    assert len(events) == sum(map(sum, plans)) + len(lifecycle)
    all_given = sorted(seq for batches in given for batch in batches for seq in batch)
    # Every writer got distinct seqs, and with the lifecycle events they cover 1..head.
    assert sorted(all_given + [e.seq for e in lifecycle]) == [e.seq for e in events]
    for batches in given:
        for batch in batches:  # one batch, one allocation: contiguous seqs
            assert batch == list(range(batch[0], batch[0] + len(batch)))
    assert session.tokens_used == len(events) - len(lifecycle)  # usage rode along
    # Snapshots taken concurrently at every 7th seq each equal a fold of the log up to them.
    snapshots = list(Snapshot.objects.filter(session=session))
    assert {s.seq for s in snapshots} == set(range(7, len(events) + 1, 7))
    for snapshot in snapshots:
        assert (snapshot.state, snapshot.facts) == fold(events, snapshot.seq)


def test_it_writes_each_idempotency_key_once_under_concurrent_retries(
    transactional_db, project, api_key, pool
):
    session = make_session(project)
    keys = [f"k{i:03d}" for i in range(41)]
    # Overlapping windows: most retries mix keys already written with fresh ones.
    batches = [keys[i:i + 3] for i in range(0, 40, 2)]
    answered = pool.run(
        send_keyed_batches,
        [(str(session.pk), api_key[1] if i % 2 else None, batches, 2) for i in range(WRITERS)],
    )

    events = _assert_gap_free(session)
    assert sorted(e.idempotency_key for e in events) == keys  # each key written exactly once
    by_key = {e.idempotency_key: e for e in events}
    for event in events:
        assert event.content == {"key": event.idempotency_key}
    for mapping in answered:  # every process was answered with the originals
        assert mapping == {k: by_key[k].seq for k in keys}


def test_it_lets_exactly_one_process_win_each_expected_head_seq_race(
    transactional_db, project, pool
):
    session = make_session(project)
    append_events(session, [EventDraft(kind="note") for _ in range(3)], actor=Actor.system())
    rounds = 8
    outcomes = pool.run(
        race_expected_head, [(str(session.pk), 3, rounds) for _ in range(WRITERS)]
    )

    for round_number in range(rounds):
        column = [per_process[round_number] for per_process in outcomes]
        assert column.count("won") == 1, (round_number, column)
        assert column.count("mismatch") == WRITERS - 1
    events = _assert_gap_free(session)
    assert len(events) == 3 + 2 * rounds  # the losers wrote nothing
    for round_number in range(rounds):
        first = 3 + 2 * round_number + 1
        assert [e.content for e in events[first - 1:first + 1]] == [{"round": round_number}] * 2
