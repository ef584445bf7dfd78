"""The plans of the statements that fold a page of sessions' states (services.state.head_states),
as PostgreSQL runs them after a few executions: from the generic plan it keeps for a prepared
statement (psycopg prepares every statement run twice on a connection), which knows nothing of
the windows it will be given. Each window must stay a range scan of the events' primary key:
a plan that reads the whole events table costs every session list with include=state a little
more for every event any session of the database holds."""

import json

import pytest
from django.db import connection

from core.actors import Actor
from sessions_app.models import Event
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.state import head_states
from tests.factories import make_session

pytestmark = pytest.mark.django_db


def plan_nodes(plan):
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


def test_the_events_after_each_snapshot_are_read_by_primary_key_under_a_generic_plan(project):
    # An ADK-like log: a message and a state patch per turn, 5,000 turns, snapshots along it.
    session = make_session(project)
    drafts = []
    for n in range(5000):
        drafts.append(EventDraft(kind="message", role="user", content={"text": f"turn {n} " * 40}))
        drafts.append(EventDraft(kind="state", content={"turn": n}))
    for start in range(0, len(drafts), 1000):
        append_events(session, drafts[start : start + 1000], actor=Actor.system("t"))
    session.refresh_from_db()
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Event._meta.db_table}")

    ran = []

    def record(execute, sql, params, many, context):
        ran.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        (folded,) = head_states([session])
    assert folded.state == {"turn": 4999}
    ((sql, params),) = [(sql, params) for sql, params in ran if "e.kind, e.content" in sql]

    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        try:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
            (plan,) = cursor.fetchone()
        finally:
            cursor.execute("RESET plan_cache_mode")
    plan = json.loads(plan) if isinstance(plan, str) else plan
    nodes = list(plan_nodes(plan[0]["Plan"]))
    on_events = [n for n in nodes if n.get("Relation Name") == Event._meta.db_table]
    assert on_events, nodes
    assert all(n["Node Type"] != "Seq Scan" for n in on_events), on_events
    assert any(
        n.get("Index Name") == "sessions_app_event_pkey" and "seq >" in n.get("Index Cond", "")
        for n in on_events
    ), on_events
