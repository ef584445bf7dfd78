"""GET /sessions/{id}/events?key=…&key=… and ?key_prefix=…: events read by idempotency key.

Served by the unique index on (session_id, idempotency_key), whose key column has the pattern
operator class (migration sessions_app 0007), so a prefix is a range of it whatever the
database's collation; a fork's keys include its ancestors' up to each fork point.
"""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.actors import Actor
from sessions_app.models import Event
from sessions_app.services.events import EventDraft, append_events
from tests.factories import make_session


def _append(session, *keys, kind="note"):
    """One event per key (None: no key), content naming the key; returns their seqs."""
    drafts = [EventDraft(kind=kind, content={"k": key}, idempotency_key=key) for key in keys]
    return [e.seq for e in append_events(session, drafts, actor=Actor.system("t")).events]


def _by_key(api, session, **params):
    response = api.get(f"/sessions/{session.pk}/events", params)
    assert response.status_code == 200, response.content
    body = response.json()
    return [(e["seq"], e["idempotency_key"]) for e in body["events"]], body["has_more"]


@pytest.fixture
def session(project):
    return make_session(project)


def test_it_reads_the_events_of_the_keys_asked_for_in_seq_order(api, session):
    _append(session, "b", None, "a", "c", "a-1", "A")

    assert _by_key(api, session, key=["c", "a", "unknown"]) == ([(3, "a"), (4, "c")], False)
    assert _by_key(api, session, key="b") == ([(1, "b")], False)
    # Keys are compared exactly: no case folding, no prefix.
    assert _by_key(api, session, key=["a"]) == ([(3, "a")], False)
    assert _by_key(api, session, key=["unknown"]) == ([], False)


def test_it_reads_the_events_whose_key_starts_with_a_prefix(api, session):
    _append(session, "step-1/a", "step-10/a", "step-1/b", None, "step-2/a", "Step-1/c", "step-1")

    assert _by_key(api, session, key_prefix="step-1/") == (
        [(1, "step-1/a"), (3, "step-1/b")],
        False,
    )
    assert _by_key(api, session, key_prefix="step-1")[0] == [
        (1, "step-1/a"),
        (2, "step-10/a"),
        (3, "step-1/b"),
        (7, "step-1"),
    ]
    assert _by_key(api, session, key_prefix="nope") == ([], False)


def test_a_prefix_is_taken_literally(api, session):
    """LIKE's wildcards and its escape character match only themselves."""
    _append(session, "a%b", "axb", "a_c", "azc", "a\\d", "a\\\\d", "é/1", "é/2", "e/3")

    assert _by_key(api, session, key_prefix="a%")[0] == [(1, "a%b")]
    assert _by_key(api, session, key_prefix="a_")[0] == [(3, "a_c")]
    assert _by_key(api, session, key_prefix="a\\")[0] == [(5, "a\\d"), (6, "a\\\\d")]
    assert _by_key(api, session, key_prefix="a\\\\")[0] == [(6, "a\\\\d")]
    assert _by_key(api, session, key_prefix="é/")[0] == [(7, "é/1"), (8, "é/2")]


def test_it_combines_keys_with_the_slice_window_order_filters_and_limit(api, session):
    keys = [f"k{n}" for n in range(1, 11)]
    _append(session, *keys)  # seqs 1..10
    _append(session, "m1", kind="message")  # seq 11

    page, more = _by_key(api, session, key_prefix="k", limit=3)
    assert (page, more) == ([(1, "k1"), (2, "k2"), (3, "k3")], True)
    page, more = _by_key(api, session, key_prefix="k", after_seq=3, limit=3)
    assert (page, more) == ([(4, "k4"), (5, "k5"), (6, "k6")], True)
    page, more = _by_key(api, session, key_prefix="k", after_seq=8, limit=3)
    assert (page, more) == ([(9, "k9"), (10, "k10")], False)
    page, _ = _by_key(api, session, key=["k2", "k5", "k9"], after_seq=2, before_seq=9)
    assert page == [(5, "k5")]
    page, more = _by_key(api, session, key_prefix="k", order="desc", limit=2)
    assert (page, more) == ([(10, "k10"), (9, "k9")], True)
    assert _by_key(api, session, key=["k1", "m1"], kind="message")[0] == [(11, "m1")]
    assert _by_key(api, session, key=["k1", "m1"], tier="durable")[0] == []


def test_a_fork_reads_its_ancestors_keys_up_to_each_fork_point(api, project):
    root = make_session(project)
    _append(root, "r1", "r2", "r3", "r4")  # 1..4
    fork = api.post(f"/sessions/{root.pk}/fork", {"at_seq": 3}).json()
    _append(root, "r5")  # 5: after the fork point, not the fork's
    fork_session = type(root).objects.get(pk=fork["id"])
    _append(fork_session, "f4", "r4")  # 4, 5: the fork's own (r4 is not inherited: seq 4 > 3)
    grandchild = api.post(f"/sessions/{fork['id']}/fork", {"at_seq": 4}).json()
    grandchild_session = type(root).objects.get(pk=grandchild["id"])
    _append(grandchild_session, "g5")

    assert _by_key(api, fork_session, key_prefix="r")[0] == [
        (1, "r1"),
        (2, "r2"),
        (3, "r3"),
        (5, "r4"),
    ]
    body = api.get(
        f"/sessions/{grandchild['id']}/events", {"key": ["r2", "f4", "r4", "r5", "g5"]}
    ).json()
    assert [(e["seq"], e["idempotency_key"], e["session_id"]) for e in body["events"]] == [
        (2, "r2", str(root.pk)),
        (4, "f4", fork["id"]),
        (5, "g5", grandchild["id"]),
    ]
    assert _by_key(api, grandchild_session, key_prefix="r", limit=2) == (
        [(1, "r1"), (2, "r2")],
        True,
    )
    assert _by_key(api, grandchild_session, key_prefix="r", after_seq=2)[0] == [(3, "r3")]


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"key": "a", "key_prefix": "a"}, "not both"),
        ({"key_prefix": ""}, "key_prefix"),
        ({"key": ""}, "key"),
        ({"key": "x" * 201}, "key"),
        ({"key": [f"k{n}" for n in range(101)]}, "key"),
        ({"key": "a\x00b"}, "key"),
        ({"key_prefix": "a\x00"}, "key_prefix"),
    ],
)
def test_it_refuses_key_queries_it_cannot_answer_with_422(api, session, params, problem):
    response = api.get(f"/sessions/{session.pk}/events", params)
    assert response.status_code == 422, response.content
    assert response.json()["error"]["code"] == "invalid_input"
    assert problem in json.dumps(response.json())


def test_keys_of_another_projects_session_are_not_found(api, other_api, session):
    _append(session, "secret")
    response = other_api.get(f"/sessions/{session.pk}/events", {"key": "secret"})
    assert response.status_code == 404


# --- The plan -------------------------------------------------------------------------------


def _plan_nodes(plan):
    yield plan
    for child in plan.get("Plans", []):
        yield from _plan_nodes(child)


def _key_read_plan(api, session, params):
    """EXPLAIN of the statement the endpoint ran for the read by key (as it ran it)."""
    with CaptureQueriesContext(connection) as captured:
        assert api.get(f"/sessions/{session.pk}/events", params).status_code == 200
    (sql,) = [
        q["sql"]
        for q in captured.captured_queries
        if "idempotency_key LIKE" in q["sql"] or "idempotency_key = ANY" in q["sql"]
    ]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
        (plan,) = cursor.fetchone()
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return list(_plan_nodes(plan[0]["Plan"]))


@pytest.fixture
def long_session(project):
    """2,000 events: every other one keyed msg-<n>, five keyed step-3/<n>; then ANALYZE."""
    session = make_session(project)
    drafts = []
    for n in range(1, 2001):
        key = f"step-3/{n}" if n % 400 == 0 else (f"msg-{n}" if n % 2 else None)
        drafts.append(EventDraft(kind="note", content={"n": n}, idempotency_key=key))
    for start in range(0, len(drafts), 1000):
        append_events(session, drafts[start : start + 1000], actor=Actor.system("t"))
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Event._meta.db_table}")
    return session


def test_a_prefix_read_is_a_range_scan_of_the_key_index(api, long_session):
    nodes = _key_read_plan(api, long_session, {"key_prefix": "step-3/", "limit": 100})

    scans = [n for n in nodes if n.get("Index Name") == "event_unique_idempotency_key"]
    assert scans, nodes
    # The prefix bounds the scan (pattern operators on the key), not a filter over the session.
    condition = scans[0]["Index Cond"]
    assert "~>=~ 'step-3/'" in condition and "~<~ 'step-30'" in condition, condition
    assert _by_key(api, long_session, key_prefix="step-3/")[0] == [
        (n, f"step-3/{n}") for n in (400, 800, 1200, 1600, 2000)
    ]


def test_a_read_of_keys_probes_the_key_index(api, long_session):
    nodes = _key_read_plan(api, long_session, {"key": ["msg-1", "msg-1999", "step-3/800"]})

    scans = [n for n in nodes if n.get("Index Name") == "event_unique_idempotency_key"]
    assert scans, nodes
    assert "idempotency_key" in scans[0]["Index Cond"] and "ANY" in scans[0]["Index Cond"]


def test_a_read_by_key_is_never_prepared(api, long_session):
    """A prepared statement's generic plan cannot bound `LIKE $1`: after five runs PostgreSQL
    may keep it (cheaper-looking than the custom plans) and walk the whole log."""
    for _ in range(8):
        assert _by_key(api, long_session, key_prefix="step-3/", limit=2)[0]
        assert _by_key(api, long_session, key=["msg-1"])[0]
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [statement for (statement,) in cursor.fetchall()]
    by_key = [
        s for s in prepared if "idempotency_key LIKE" in s or "ORDER BY seq" in s and "ANY" in s
    ]
    assert by_key == []
    # Slices by position are prepared as before (so the check above can see prepared ones).
    for after in (5, 6, 7):
        assert _by_key(api, long_session, after_seq=after, limit=1)[0]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%ORDER BY seq%"],
        )
        assert cursor.fetchone()[0] >= 1
