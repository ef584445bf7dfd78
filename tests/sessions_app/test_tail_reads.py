"""A filtered read of the end of a long log touches about what it returns (issue 25's measure,
issue 27 §2): the framework adapters read their last 50 items by key prefix (OpenAI Agents)
or by kind (ADK), newest first, and each read used to fetch every matching row of the session
and sort them, so it grew with the history (queries._window_first).

Rows touched are counted by PostgreSQL itself: the per-transaction statistics of the events
table and its indexes (pg_stat_get_xact_tuples_fetched / _returned), read in the test's
transaction before and after the request. No timing.
"""

import random

import pytest
from django.db import connection

from core.actors import Actor
from sessions_app.services.events import EventDraft, append_events
from tests.factories import make_session
from tests.sessions_app.naive import visible_events

HISTORY = 3000


def _rows_touched() -> int:
    """Rows of the events table and entries of its indexes read so far in this transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(pg_stat_get_xact_tuples_fetched(c.oid)"
            " + pg_stat_get_xact_tuples_returned(c.oid)), 0)"
            " FROM pg_class c WHERE c.oid = 'sessions_app_event'::regclass"
            " OR c.oid IN (SELECT indexrelid FROM pg_index"
            " WHERE indrelid = 'sessions_app_event'::regclass)"
        )
        (touched,) = cursor.fetchone()
    return int(touched)


def _grow(session, drafts):
    for start in range(0, len(drafts), 1000):
        append_events(session, drafts[start : start + 1000], actor=Actor.system("t"))


@pytest.fixture
def analyzed(project):
    """The planner's view of a shared table: many sessions (here 300 others of 60 events,
    keyed otherwise), analysed. It then expects one session's key prefix or kinds to match a
    handful of rows, and plans the read that fetched them all and sorted them."""
    for n in range(300):
        _grow(
            make_session(project),
            [
                EventDraft(kind="tool_result", content={"i": i}, idempotency_key=f"x:{n}:{i}")
                for i in range(60)
            ],
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE sessions_app_event")  # undone with the test's transaction


def _touched_by(api, session, params):
    before = _rows_touched()
    response = api.get(f"/sessions/{session.pk}/events", params)
    assert response.status_code == 200, response.content
    return response.json(), _rows_touched() - before


def test_the_last_items_by_key_prefix_touch_a_bounded_number_of_rows(api, project, analyzed):
    """The OpenAI adapter's get_items(50): every event keyed `oai:…`, the last 58 asked for."""
    session = make_session(project)
    _grow(
        session,
        [
            EventDraft(
                kind="message",
                role="user",
                content={"text": f"m{i}"},
                idempotency_key=f"oai:item:{i}",
            )
            for i in range(HISTORY)
        ],
    )

    body, touched = _touched_by(api, session, {"key_prefix": "oai:", "order": "desc", "limit": 58})

    assert [e["seq"] for e in body["events"]] == list(range(HISTORY, HISTORY - 58, -1))
    assert body["has_more"] is True
    # The window is 2 × 59 + 64 positions; read whole, the log is 3,000 rows (and as many
    # index entries).
    assert touched < 600, touched


def test_a_page_of_a_thousand_by_key_prefix_touches_about_a_thousand_rows(api, project, analyzed):
    """The OpenAI adapter's get_items() (the Runner's read of the whole session) pages back
    1,000 items at a time: each page reads about its own rows, not the session's."""
    session = make_session(project)
    _grow(
        session,
        [
            EventDraft(kind="message", content={"text": f"m{i}"}, idempotency_key=f"oai:item:{i}")
            for i in range(HISTORY)
        ],
    )
    seen: list[int] = []
    before = None
    while True:
        params = {"key_prefix": "oai:", "order": "desc", "limit": 1000}
        body, touched = _touched_by(
            api, session, params | ({"before_seq": before} if before else {})
        )
        seen += [e["seq"] for e in body["events"]]
        assert touched < 2 * 2 * 1001 + 200, touched  # rows and index entries of ~1,001 rows
        if not body["has_more"]:
            break
        before = seen[-1]
    assert seen == list(range(HISTORY, 0, -1))


def test_the_last_events_of_some_kinds_touch_a_bounded_number_of_rows(api, project, analyzed):
    """The ADK adapter's get_session(50): each ADK event is a message beside a state event."""
    session = make_session(project)
    drafts = []
    for i in range(HISTORY // 2):
        drafts.append(EventDraft(kind="message", role="user", content={"text": f"m{i}"}))
        drafts.append(EventDraft(kind="state", content={"n": i}))
    _grow(session, drafts)

    body, touched = _touched_by(
        api,
        session,
        {"kind": ["message", "tool_call", "tool_result", "note"], "order": "desc", "limit": 58},
    )

    assert [e["seq"] for e in body["events"]] == list(range(HISTORY - 1, HISTORY - 117, -2))
    assert touched < 600, touched


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_a_windowed_read_answers_as_a_naive_filter_of_the_whole_log(api, project, order):
    """Matches dense, sparse and absent in the window: the rows past it are read when the
    window holds too few, and the answer is the naive filter's."""
    session = make_session(project)
    rng = random.Random(5)
    kinds = ["message", "note", "state", "tool_call"]
    drafts = []
    for i in range(1500):
        # Dense matches near both ends, sparse in the middle.
        kind = rng.choice(kinds) if i < 150 or i > 900 else ("note" if i % 97 == 0 else "state")
        key = f"p:{i}" if kind == "note" else (f"q:{i}" if rng.random() < 0.5 else None)
        drafts.append(EventDraft(kind=kind, content={"i": i}, idempotency_key=key))
    _grow(session, drafts)
    events = visible_events(session)
    asks = [
        ({"kind": ["note"]}, lambda e: e.kind == "note"),
        ({"kind": ["message", "tool_call"]}, lambda e: e.kind in ("message", "tool_call")),
        ({"key_prefix": "p:"}, lambda e: (e.idempotency_key or "").startswith("p:")),
        ({"key_prefix": "q:"}, lambda e: (e.idempotency_key or "").startswith("q:")),
        ({"tier": "durable"}, lambda e: e.tier == "durable"),
    ]
    for params, keep in asks:
        for limit in (1, 20, 100, 200, 1000):
            for bound in ({}, {"after_seq": 120}, {"before_seq": 1200}):
                ask = {**params, **bound, "order": order, "limit": limit}
                body, _ = _touched_by(api, session, ask)
                rows = [
                    e.seq
                    for e in events
                    if keep(e)
                    and e.seq > bound.get("after_seq", 0)
                    and e.seq < bound.get("before_seq", 10**9)
                ]
                if order == "desc":
                    rows.reverse()
                assert [e["seq"] for e in body["events"]] == rows[:limit], ask
                assert body["has_more"] is (len(rows) > limit), ask


def test_the_listed_last_events_touch_a_bounded_number_of_rows(api, project, analyzed):
    """GET /sessions?include=events (the ADK adapter's get_session): each listed session's
    last events are one walk back along the primary key, bounded by its head."""
    session = make_session(project, external_id="long")
    _grow(
        session,
        [EventDraft(kind="note", content={"text": f"n{i}"}) for i in range(HISTORY)],
    )
    before = _rows_touched()
    response = api.get(
        "/sessions", {"external_id": "long", "include": "events", "events_limit": 108}
    )
    touched = _rows_touched() - before
    assert response.status_code == 200, response.content
    (listed,) = response.json()["sessions"]
    assert [e["seq"] for e in listed["events"]] == list(range(HISTORY - 107, HISTORY + 1))
    assert listed["events_has_more"] is True
    assert touched < 600, touched
