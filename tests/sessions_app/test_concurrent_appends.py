"""Invariant 1 (and 3, 4 under contention): several OS processes write one session at once.

Each writer is a separate spawned interpreter with its own database connection (tests.multiproc),
some through the HTTP API, some through the service, all released by one barrier. The append has
three write paths (services.events): one statement for a few events to an unbudgeted session
outside a transaction; the transactional UPDATE-then-INSERT (`_append_locked`) for budgeted
sessions, refusals and appends inside an enclosing atomic block; and COPY for batches of
COPY_FROM_ROWS events or more. Each path is raced on its own, then all three at once with
pause/resume in between; every child counts the paths its appends took, so a race cannot
silently stop exercising the path it is named for.
"""

import json
import random
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client

from core.actors import Actor
from sessions_app import storage
from sessions_app.errors import HeadSeqMismatch
from sessions_app.models import Event, Session, Snapshot
from sessions_app.services import events as events_service
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
        f"/api/v1/sessions/{session_id}/events",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw_key}"},
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
                body = _post_events(
                    raw_key,
                    session_id,
                    {
                        "events": [
                            {"kind": "note", "content": {"key": k}, "idempotency_key": k}
                            for k in keys
                        ]
                    },
                )
                pairs = [(k, e["seq"]) for k, e in zip(keys, body["events"], strict=True)]
            else:
                drafts = [
                    EventDraft(kind="note", content={"key": k}, idempotency_key=k) for k in keys
                ]
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
            append_events(session, drafts, actor=Actor.system("racer"), expected_head_seq=expected)
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
    batches = [keys[i : i + 3] for i in range(0, 40, 2)]
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
    outcomes = pool.run(race_expected_head, [(str(session.pk), 3, rounds) for _ in range(WRITERS)])

    for round_number in range(rounds):
        column = [per_process[round_number] for per_process in outcomes]
        assert column.count("won") == 1, (round_number, column)
        assert column.count("mismatch") == WRITERS - 1
    events = _assert_gap_free(session)
    assert len(events) == 3 + 2 * rounds  # the losers wrote nothing
    for round_number in range(rounds):
        first = 3 + 2 * round_number + 1
        assert [e.content for e in events[first - 1 : first + 1]] == [{"round": round_number}] * 2


# --- Each write path raced on its own, then all of them at once -------------------------------
#
# Children report what they were acknowledged: per event (seq, marker, tokens, cost), the marker
# being the "m" its content carries, so the parent can find every acknowledged event in the
# database. The parent then checks invariant 1 from the database itself (_assert_invariant_1).

Ack = tuple[int, str, int, str]  # seq, marker, tokens, cost
COPY_BELOW = storage.COPY_FROM_ROWS - 1  # the largest batch that is not a COPY


@contextmanager
def _paths_taken() -> Iterator[Counter]:
    """Count which write path each append of this process takes (see services.events).

    "one": written in one statement ("json": of those, batches of COPY_FROM_ROWS or more,
    their rows as one JSON array); "one-declined": that statement's WHERE refused it (a
    budgeted session); "tx": the transactional path; "copy" / "insert": how it wrote its rows;
    "lookup": idempotency-key look-ups (one per keyed append, two when it lost a race).
    """
    taken: Counter = Counter()
    one = events_service._append_in_one_statement
    tx = events_service._append_locked
    insert = storage.insert_events
    lookup = events_service._originals_by_key

    def spy_one(*args, **kwargs):
        written = one(*args, **kwargs)
        taken["one" if written is not None else "one-declined"] += 1
        if written is not None and len(written) >= storage.COPY_FROM_ROWS:
            taken["json"] += 1
        return written

    def spy_tx(*args, **kwargs):
        taken["tx"] += 1
        return tx(*args, **kwargs)

    def spy_insert(events):
        taken["copy" if len(events) >= storage.COPY_FROM_ROWS else "insert"] += 1
        return insert(events)

    def spy_lookup(*args, **kwargs):
        taken["lookup"] += 1
        return lookup(*args, **kwargs)

    events_service._append_in_one_statement = spy_one
    events_service._append_locked = spy_tx
    storage.insert_events = spy_insert
    events_service._originals_by_key = spy_lookup
    try:
        yield taken
    finally:  # the pool's children run the next test's race too
        events_service._append_in_one_statement = one
        events_service._append_locked = tx
        storage.insert_events = insert
        events_service._originals_by_key = lookup


_KINDS = ("note", "message", "fact", "state")


def _event(marker: str, n: int, rng: random.Random, key: str | None = None) -> dict[str, Any]:
    kind = _KINDS[n % len(_KINDS)]
    content: dict[str, Any] = {"m": marker}
    if kind == "message":
        content["text"] = f"said {marker}"
    elif kind == "fact":
        content.update(key=f"f{n % 5}", value=marker)
    elif kind == "state":
        content["by"] = {marker.split(".")[0]: n}
    event = {
        "kind": kind,
        "content": content,
        "tokens": rng.randint(0, 3),
        "cost": f"0.00{rng.randint(0, 9)}",
    }
    if key is not None:
        event["idempotency_key"] = key
    return event


def _send(session: Session, raw_key: str | None, events: list[dict]) -> tuple[list[int], str, int]:
    """Append through the API (raw_key) or the service: (seqs, status after, replayed count)."""
    if raw_key is not None:
        body = _post_events(raw_key, str(session.pk), {"events": events})
        return (
            [e["seq"] for e in body["events"]],
            body["status"],
            sum(e["replayed"] for e in body["events"]),
        )
    drafts = [
        EventDraft(
            kind=e["kind"],
            content=e["content"],
            tokens=e["tokens"],
            cost=Decimal(e["cost"]),
            idempotency_key=e.get("idempotency_key"),
        )
        for e in events
    ]
    result = append_events(session, drafts, actor=Actor.system("racer"))
    return [e.seq for e in result.events], session.status, len(result.replayed)


def _acks(seqs: list[int], events: list[dict]) -> list[Ack]:
    return [
        (seq, e["content"]["m"], e["tokens"], e["cost"])
        for seq, e in zip(seqs, events, strict=True)
    ]


def write_batches(
    session_id: str, raw_key: str | None, tag: str, sizes: list[int], seed: int
) -> dict[str, Any]:
    """One unkeyed batch per size, then a one-event `done` batch (see toggle_pause)."""
    session = Session.objects.get(pk=session_id)
    rng = random.Random(seed)
    acks: list[list[Ack]] = []
    statuses: list[str] = []
    with _paths_taken() as paths:
        for number, size in enumerate([*sizes, 1]):
            events = [_event(f"{tag}.{number}.{n}", n, rng) for n in range(size)]
            if number == len(sizes):
                events[0]["content"]["done"] = tag
            seqs, status, _ = _send(session, raw_key, events)
            acks.append(_acks(seqs, events))
            statuses.append(status)
    return {"acks": acks, "statuses": statuses, "paths": dict(paths)}


class _RollBack(Exception):
    pass


def write_in_atomic_blocks(
    session_id: str, tag: str, blocks: list[tuple[list[int], str]], seed: int
) -> dict[str, Any]:
    """Appends inside enclosing atomic blocks, each (sizes, outcome).

    outcome "commit": every append of the block commits together; "rollback": the block raises
    after its appends (nothing of it may remain, not even a seq); "savepoint": the block's last
    append is in a nested atomic block that is rolled back, the others commit.
    """
    session = Session.objects.get(pk=session_id)
    rng = random.Random(seed)
    acks: list[list[Ack]] = []
    with _paths_taken() as paths:
        for number, (sizes, outcome) in enumerate([*blocks, ([1], "commit")]):
            block: list[list[Ack]] = []
            try:
                with transaction.atomic():
                    for part, size in enumerate(sizes):
                        events = [_event(f"{tag}.{number}.{part}.{n}", n, rng) for n in range(size)]
                        if number == len(blocks):
                            events[0]["content"]["done"] = tag
                        if outcome == "savepoint" and part == len(sizes) - 1:
                            try:
                                with transaction.atomic():
                                    _send(session, None, events)
                                    raise _RollBack
                            except _RollBack:
                                pass
                        else:
                            seqs, _, _ = _send(session, None, events)
                            block.append(_acks(seqs, events))
                    if outcome == "rollback":
                        raise _RollBack
            except _RollBack:
                block = []
            acks.extend(block)
    return {"acks": acks, "paths": dict(paths)}


def write_copy_batches(
    session_id: str,
    raw_key: str | None,
    tag: str,
    sizes: list[int],
    keyed: list[list[str]],
    extra: list[list[str]],
    seed: int,
    raced: bool = True,
) -> dict[str, Any]:
    """Unkeyed batches of `sizes` events interleaved with keyed batches, then the keyed retries.

    Pass 1 sends keyed batch j between unkeyed ones; every process sends the same keyed batch at
    once (a barrier), so they race for the same keys (a loser's COPY fails on the unique key and
    its second attempt replays). After a barrier, pass 2 resends each keyed batch j extended by
    `extra[j]`: part replay, part new rows, again raced by every process. Keyed events get
    tokens and cost from their key, so every sender asks for the same row. Not `raced`: this
    process alone sends these keys (no barrier between the passes).
    """
    session = Session.objects.get(pk=session_id)
    rng = random.Random(seed)
    acks: list[list[Ack]] = []
    answered: dict[str, int] = {}
    replayed = 0

    def keyed_events(keys: list[str]) -> list[dict]:
        return [_event(k, n, random.Random(k), key=k) for n, k in enumerate(keys)]

    def send_keyed(keys: list[str]) -> None:
        nonlocal replayed
        if raced:
            barrier().wait()
        seqs, _, count = _send(session, raw_key, keyed_events(keys))
        replayed += count
        for key, seq in zip(keys, seqs, strict=True):
            # Every sender is answered with the one original, every time.
            assert answered.setdefault(key, seq) == seq, (key, answered[key], seq)

    with _paths_taken() as paths:
        for number, size in enumerate(sizes):
            events = [_event(f"{tag}.{number}.{n}", n, rng) for n in range(size)]
            if raw_key is None and number % 2:
                # In an enclosing transaction: the transactional path's COPY; the others go in
                # one statement, their rows as JSON.
                with transaction.atomic():
                    seqs, _, _ = _send(session, raw_key, events)
            else:
                seqs, _, _ = _send(session, raw_key, events)
            acks.append(_acks(seqs, events))
            if number < len(keyed):
                send_keyed(keyed[number])
        for keys, more in zip(keyed, extra, strict=True):
            send_keyed(keys + more)
        events = [_event(f"{tag}.done", 0, rng)]
        events[0]["content"]["done"] = tag
        seqs, _, _ = _send(session, raw_key, events)
        acks.append(_acks(seqs, events))
    return {"acks": acks, "answered": answered, "replayed": replayed, "paths": dict(paths)}


def toggle_pause(session_id: str, raw_key: str, writers: int) -> dict[str, Any]:
    """Pause and resume (service and API in turn) until every writer has written its `done`.

    A writer that fails breaks the run's barrier (tests.multiproc): then stop as well.
    """
    session = Session.objects.get(pk=session_id)
    moves: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not barrier().broken:
        to = "paused" if session.status in ("open", "resumed") else "resumed"
        if len(moves) % 4 < 2:
            (pause_session if to == "paused" else resume_session)(
                session, actor=Actor.system("toggler"), reason="race"
            )
        else:
            response = Client().post(
                f"/api/v1/sessions/{session_id}/{'pause' if to == 'paused' else 'resume'}",
                data=json.dumps({"reason": "race"}),
                content_type="application/json",
                headers={"Authorization": f"Bearer {raw_key}"},
            )
            assert response.status_code == 200, response.content
            session.status = response.json()["status"]
        assert session.status == to
        moves.append(to)
        if Event.objects.filter(session_id=session_id, content__has_key="done").count() >= writers:
            break
    return {"moves": moves}


_ROLES = {
    "batches": write_batches,
    "atomic": write_in_atomic_blocks,
    "copy": write_copy_batches,
    "toggle": toggle_pause,
}


def play(role: str, *args: Any) -> dict[str, Any]:
    """One entry point, so one run can give each process a different part."""
    return {"role": role, **_ROLES[role](*args)}


def _assert_invariant_1(session: Session, acks: list[Ack]) -> list[tuple]:
    """Invariant 1 read back from the database itself, against what the writers were told.

    seqs are exactly 1..head_seq (no gap, no duplicate); head_seq on the session row is the
    max seq; every acknowledged event is there once, at the seq it was given, with its own
    content; the only rows nobody was acknowledged are system (lifecycle, handoff) events; the usage
    counters are the sums of what was acknowledged. Returns the rows (seq, kind, content, actor).
    """
    events_table = connection.ops.quote_name(Event._meta.db_table)
    sessions_table = connection.ops.quote_name(Session._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT seq, kind, content, tokens, cost, actor FROM {events_table}"
            " WHERE session_id = %s ORDER BY seq",
            [session.pk],
        )
        # Django has psycopg hand jsonb over as text (JSONField decodes it).
        rows = [(*row[:2], json.loads(row[2]), *row[3:]) for row in cursor.fetchall()]
        cursor.execute(
            f"SELECT head_seq, tokens_used, cost_used FROM {sessions_table} WHERE id = %s",
            [session.pk],
        )
        head_seq, tokens_used, cost_used = cursor.fetchone()
        cursor.execute(
            f"SELECT count(*), count(DISTINCT seq), coalesce(max(seq), 0) FROM {events_table}"
            " WHERE session_id = %s",
            [session.pk],
        )
        count, distinct, max_seq = cursor.fetchone()
    seqs = [row[0] for row in rows]
    assert (count, distinct) == (len(rows), len(rows)), "duplicate seqs"
    assert seqs == list(range(1, head_seq + 1)), f"seqs are not 1..{head_seq}: gap or surplus"
    assert head_seq == max_seq

    acked_seqs = Counter(ack[0] for ack in acks)
    twice = sorted(seq for seq, n in acked_seqs.items() if n > 1)
    assert not twice, f"seqs acknowledged to two events: {twice[:10]}"
    by_seq = {row[0]: row for row in rows}
    for seq, marker, tokens, cost in acks:
        assert seq in by_seq, f"acknowledged event {marker} (seq {seq}) is missing"
        _, _, content, row_tokens, row_cost, _ = by_seq[seq]
        assert (content.get("m"), row_tokens, row_cost) == (marker, tokens, Decimal(cost)), seq
    unacknowledged = [row for row in rows if row[0] not in acked_seqs]
    system_kinds = ("lifecycle", "handoff")
    assert all(row[1] in system_kinds for row in unacknowledged), [
        row[:3] for row in unacknowledged if row[1] not in system_kinds
    ][:5]
    assert len(rows) == len(acks) + len(unacknowledged)

    assert tokens_used == sum(ack[2] for ack in acks)
    assert cost_used == sum((Decimal(ack[3]) for ack in acks), Decimal(0))
    return [(row[0], row[1], row[2], row[5]) for row in rows]


def _flat(results: list[dict[str, Any]]) -> list[Ack]:
    return [ack for result in results for batch in result.get("acks", []) for ack in batch]


def _keyed_acks(answered: dict[str, int]) -> list[Ack]:
    """Each key once, at the seq every sender was told, with the tokens and cost it carries."""
    acks = []
    for key, seq in answered.items():
        event = _event(key, 0, random.Random(key))
        acks.append((seq, key, event["tokens"], event["cost"]))
    return acks


def _paths(results: list[dict[str, Any]]) -> Counter:
    return sum((Counter(result["paths"]) for result in results), Counter())


def test_budgeted_appends_take_the_transactional_path_gap_free_under_racing_processes(
    transactional_db, project, api_key, pool
):
    """Multi-statement path: a budget the race never exhausts keeps every append off the
    one-statement path (its WHERE refuses budgeted sessions) and nothing pauses."""
    session = make_session(project, budget_max_tokens=10**6, budget_max_cost=Decimal(10**4))
    rng = random.Random(2)
    plans = [[rng.randint(1, COPY_BELOW) for _ in range(15)] for _ in range(WRITERS)]
    results = pool.run(
        play,
        [
            ("batches", str(session.pk), api_key[1] if i % 2 else None, f"b{i}", plans[i], i)
            for i in range(WRITERS)
        ],
    )

    rows = _assert_invariant_1(session, _flat(results))
    assert len(rows) == sum(map(sum, plans)) + WRITERS  # + each writer's `done`
    assert not [row for row in rows if row[1] == "lifecycle"]
    assert {s for result in results for s in result["statuses"]} == {"open"}
    paths = _paths(results)
    appends = sum(len(plan) + 1 for plan in plans)
    assert (paths["one"], paths["one-declined"], paths["tx"]) == (0, appends, appends), paths


def test_a_budget_running_out_mid_race_pauses_the_session_exactly_once(
    transactional_db, project, api_key, pool
):
    """Multi-statement path: the append whose tokens cross the budget pauses the session in its
    own transaction, once, however many processes cross it at about the same time."""
    budget = 120
    session = make_session(project, budget_max_tokens=budget)
    rng = random.Random(3)
    plans = [[rng.randint(1, COPY_BELOW) for _ in range(12)] for _ in range(WRITERS)]
    results = pool.run(
        play,
        [
            ("batches", str(session.pk), api_key[1] if i % 2 else None, f"p{i}", plans[i], 10 + i)
            for i in range(WRITERS)
        ],
    )

    acks = _flat(results)
    rows = _assert_invariant_1(session, acks)
    tokens = sum(ack[2] for ack in acks)
    assert tokens > 2 * budget  # it ran out mid-race, with plenty of appends after
    (pause,) = [row for row in rows if row[1] == "lifecycle"]  # exactly one lifecycle event
    pause_seq, _, content, actor = pause
    assert actor == "budget"
    assert (content["from"], content["to"]) == ("open", "paused")
    assert (
        f"budget exceeded: {_tokens_upto(acks, pause_seq)} tokens used of {budget}"
        == (content["reason"])
    )
    # It paused right after the append that crossed the budget, not before or later: that
    # append ends at pause_seq - 1, and the tokens before it were still within the budget.
    (crossing,) = [
        batch for result in results for batch in result["acks"] if batch[-1][0] == pause_seq - 1
    ]
    assert _tokens_upto(acks, crossing[0][0] - 1) <= budget < _tokens_upto(acks, pause_seq)
    # The pause opened one `budget` handoff (handoffs_app), recorded in the same transaction.
    (opened,) = [row for row in rows if row[1] == "handoff"]
    assert opened[0] == pause_seq + 1
    assert (opened[2]["kind"], opened[2]["step"]) == ("budget", "requested")
    # Paused sessions still take events (WRITABLE_STATUSES): the appends after the pause were
    # acknowledged as paused, each process saw open until it saw paused, and nothing paused
    # (or wrote a lifecycle event) a second time.
    assert any(ack[0] > pause_seq for ack in acks)
    for result in results:
        statuses = result["statuses"]
        assert statuses == sorted(statuses, key=["open", "paused"].index), statuses
    session.refresh_from_db()
    assert session.status == "paused"
    paths = _paths(results)
    assert paths["one"] == 0 and paths["tx"] == sum(len(plan) + 1 for plan in plans), paths


def _tokens_upto(acks: list[Ack], seq: int) -> int:
    return sum(ack[2] for ack in acks if ack[0] <= seq)


def test_appends_inside_enclosing_atomic_blocks_stay_gap_free_under_racing_processes(
    transactional_db, project, pool
):
    """Multi-statement path: inside an enclosing transaction each append holds the session's row
    lock until the outer commit; rolled-back blocks and savepoints give their seqs back."""
    session = make_session(project)
    rng = random.Random(4)
    outcomes = ["commit", "commit", "rollback", "savepoint"]
    plans = [
        [
            ([rng.randint(1, COPY_BELOW) for _ in range(rng.randint(1, 3))], outcomes[n % 4])
            for n in range(10)
        ]
        for _ in range(WRITERS)
    ]
    results = pool.run(
        play, [("atomic", str(session.pk), f"a{i}", plans[i], 20 + i) for i in range(WRITERS)]
    )

    acks = _flat(results)
    rows = _assert_invariant_1(session, acks)
    assert not [row for row in rows if row[1] == "lifecycle"]
    committed = (
        sum(
            sum(sizes if outcome == "commit" else sizes[:-1] if outcome == "savepoint" else [])
            for plan in plans
            for sizes, outcome in plan
        )
        + WRITERS
    )
    assert len(rows) == committed
    paths = _paths(results)
    attempted = sum(len(sizes) for plan in plans for sizes, _ in plan) + WRITERS
    assert (paths["one"], paths["one-declined"], paths["tx"]) == (0, 0, attempted), paths


def test_copy_batches_and_raced_keyed_retries_stay_gap_free_under_racing_processes(
    transactional_db, project, api_key, pool
):
    """Larger batches (8..50 events), by COPY (in an enclosing transaction) and in one statement
    (their rows as JSON), and keyed batches that every process sends at once and then again
    extended by new keys (replay path, raced)."""
    session = make_session(project)
    rng = random.Random(5)
    plans = [[rng.randint(storage.COPY_FROM_ROWS, 50) for _ in range(6)] for _ in range(WRITERS)]
    keyed = [[f"k{j}-{n}" for n in range(rng.randint(8, 20))] for j in range(4)]
    extra = [[f"x{j}-{n}" for n in range(size)] for j, size in enumerate([0, 3, 8, 12])]
    results = pool.run(
        play,
        [
            (
                "copy",
                str(session.pk),
                api_key[1] if i % 2 else None,
                f"c{i}",
                plans[i],
                keyed,
                extra,
                30 + i,
            )
            for i in range(WRITERS)
        ],
    )

    keys = [k for batch in keyed for k in batch] + [k for batch in extra for k in batch]
    answered = results[0]["answered"]
    assert sorted(answered) == sorted(keys)
    for result in results:  # every process was answered with the same originals
        assert result["answered"] == answered
    # Each key was written once (by whichever process won it), at the seq everybody was told.
    rows = _assert_invariant_1(session, _flat(results) + _keyed_acks(answered))
    assert Event.objects.filter(session=session, idempotency_key__isnull=False).count() == len(keys)
    assert len(rows) == sum(map(sum, plans)) + WRITERS + len(keys)
    # Every process sent every keyed batch twice and was answered with at least one replay:
    # the second pass is part replay for all of them.
    assert all(result["replayed"] >= sum(map(len, keyed)) for result in results)
    paths = _paths(results)
    # Some sends lost the race between their look-up and their write, and replayed on their
    # second attempt (around a third of them do here; all four start each keyed send at once).
    assert paths["lookup"] > 2 * len(keyed) * WRITERS, paths
    service_batches = sum(len(plan) for i, plan in enumerate(plans) if i % 2 == 0)
    assert paths["copy"] >= service_batches // 2 and paths["json"] > service_batches // 2, paths
    assert paths["copy"] + paths["json"] >= sum(map(len, plans)), paths


def test_all_three_paths_race_one_session_amid_pause_and_resume(
    transactional_db, project, api_key, pool
):
    """One session, at once: small API appends (one statement), appends in atomic blocks
    (transactional), COPY batches with keyed retries, and a process pausing and resuming it."""
    session = make_session(project)
    rng = random.Random(6)
    small = [rng.randint(1, COPY_BELOW) for _ in range(30)]
    blocks = [
        ([rng.randint(1, COPY_BELOW) for _ in range(2)], ["commit", "rollback"][n % 2])
        for n in range(12)
    ]
    copies = [rng.randint(storage.COPY_FROM_ROWS, 40) for _ in range(6)]
    keyed = [[f"mk{j}-{n}" for n in range(10)] for j in range(2)]
    extra = [[f"mx{j}-{n}" for n in range(9)] for j in range(2)]
    small_api, atomic, copy, toggler = pool.run(
        play,
        [
            ("batches", str(session.pk), api_key[1], "m0", small, 40),
            ("atomic", str(session.pk), "m1", blocks, 41),
            ("copy", str(session.pk), None, "m2", copies, keyed, extra, 42, False),
            ("toggle", str(session.pk), api_key[1], 3),
        ],
    )

    writers = [small_api, atomic, copy]
    acks = _flat(writers) + _keyed_acks(copy["answered"])
    assert len(copy["answered"]) == sum(map(len, keyed + extra))
    rows = _assert_invariant_1(session, acks)
    committed = sum(small) + sum(sum(sizes) for sizes, outcome in blocks if outcome == "commit")
    assert len(acks) == committed + sum(copies) + len(copy["answered"]) + 3
    # The toggler's moves are the lifecycle events, in order, each from where the last one went.
    lifecycle = [row for row in rows if row[1] == "lifecycle"]
    assert [row[2]["to"] for row in lifecycle] == toggler["moves"]
    assert [row[2]["from"] for row in lifecycle] == ["open", *toggler["moves"][:-1]]
    session.refresh_from_db()
    assert session.status == toggler["moves"][-1]
    # ... and they were interleaved with the writers' appends, not all before or after them.
    assert len(lifecycle) >= 2
    assert any(lifecycle[0][0] < ack[0] < lifecycle[-1][0] for ack in acks)
    # Each writer took the path it stands for.
    assert small_api["paths"]["one"] == len(small) + 1, small_api["paths"]
    assert atomic["paths"].get("one", 0) == 0
    assert atomic["paths"]["tx"] == sum(len(sizes) for sizes, _ in blocks) + 1
    assert copy["paths"]["copy"] >= len(copies) // 2, copy["paths"]
    assert copy["paths"]["copy"] + copy["paths"]["json"] >= len(copies), copy["paths"]
    # Snapshots taken after commit by whichever process crossed each 7th seq fold to the log.
    events = [{"seq": seq, "kind": kind, "content": content} for seq, kind, content, _ in rows]
    snapshots = list(Snapshot.objects.filter(session=session))
    assert {s.seq for s in snapshots} == set(range(7, len(rows) + 1, 7))
    for snapshot in snapshots:
        assert (snapshot.state, snapshot.facts) == fold(events, snapshot.seq)
