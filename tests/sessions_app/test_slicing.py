"""GET /sessions/{id}/events: positional slices, filters and order, across fork segments."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.actors import Actor
from sessions_app.models import Session
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.sessions import fork_session
from tests.factories import make_session
from tests.sessions_app.naive import visible_events

KINDS = ["message", "tool_call", "tool_result", "note", "state", "fact", "decision"]


def _drafts(tag: str, count: int, offset: int) -> list[EventDraft]:
    drafts = []
    for i in range(count):
        kind = KINDS[(i + offset) % len(KINDS)]
        content: dict = {"tag": tag, "i": i}
        if kind == "fact":
            content.update(key=f"k{i}", value=i)
        elif kind == "decision":
            content.update(decision=f"d{i}")
        # Every fifth message is kept durable by the agent: tier is not only the kind's default.
        tier = "durable" if kind == "message" and i % 5 == 0 else None
        drafts.append(EventDraft(kind=kind, content=content, tier=tier))
    return drafts


@pytest.fixture
def lineage(project):
    """root (30 events) -> child forked at 12 (+10) -> grandchild forked at 18 (+8)."""
    actor = Actor.system()
    root = make_session(project)
    append_events(root, _drafts("root", 30, 0), actor=actor)
    child = fork_session(root, at_seq=12, actor=actor)
    append_events(child, _drafts("child", 10, 3), actor=actor)
    grandchild = fork_session(child, at_seq=18, actor=actor)
    append_events(grandchild, _drafts("grandchild", 8, 5), actor=actor)
    return root, child, grandchild


def _expected(session: Session, *, after, before, limit, kinds, tier, order):
    rows = [
        e
        for e in visible_events(session)
        if (after is None or e.seq > after)
        and (before is None or e.seq < before)
        and (not kinds or e.kind in kinds)
        and (tier is None or e.tier == tier)
    ]
    if order == "desc":
        rows.reverse()
    return [(e.seq, e.kind, e.tier, e.content, str(e.session_id)) for e in rows[:limit]], (
        len(rows) > limit
    )


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    which=st.integers(0, 2),
    after=st.none() | st.integers(0, 40),
    before=st.none() | st.integers(1, 45),
    limit=st.integers(1, 15),
    kinds=st.lists(st.sampled_from(KINDS), max_size=3, unique=True),
    tier=st.sampled_from([None, "transient", "durable"]),
    order=st.sampled_from(["asc", "desc"]),
)
def test_it_slices_like_a_naive_filter_of_the_whole_history(
    api, lineage, which, after, before, limit, kinds, tier, order
):
    session = lineage[which]
    params: dict = {"limit": limit, "order": order}
    if after is not None:
        params["after_seq"] = after
    if before is not None:
        params["before_seq"] = before
    if kinds:
        params["kind"] = kinds
    if tier:
        params["tier"] = tier
    response = api.get(f"/sessions/{session.pk}/events", params)
    assert response.status_code == 200, response.content
    body = response.json()
    rows, has_more = _expected(
        session, after=after, before=before, limit=limit, kinds=kinds, tier=tier, order=order
    )
    assert [
        (e["seq"], e["kind"], e["tier"], e["content"], e["session_id"]) for e in body["events"]
    ] == rows
    assert body["has_more"] is has_more
    assert body["head_seq"] == session.head_seq


def test_it_pages_through_a_fork_with_after_seq_and_has_more(api, lineage):
    grandchild = lineage[2]
    seen, after = [], 0
    while True:
        body = api.get(f"/sessions/{grandchild.pk}/events", {"after_seq": after, "limit": 7}).json()
        seen += [(e["seq"], e["content"]["tag"]) for e in body["events"]]
        if not body["has_more"]:
            break
        after = body["events"][-1]["seq"]
    assert seen == (
        [(s, "root") for s in range(1, 13)]
        + [(s, "child") for s in range(13, 19)]
        + [(s, "grandchild") for s in range(19, 27)]
    )


def test_it_filters_by_kind_and_tier(api, project):
    session = make_session(project)
    append_events(session, _drafts("only", 14, 0), actor=Actor.system())
    facts = api.get(f"/sessions/{session.pk}/events", {"kind": "fact"}).json()["events"]
    assert [e["seq"] for e in facts] == [6, 13]
    durable = api.get(f"/sessions/{session.pk}/events", {"tier": "durable"}).json()["events"]
    assert [(e["seq"], e["kind"]) for e in durable] == [
        (1, "message"),
        (6, "fact"),
        (7, "decision"),
        (13, "fact"),
        (14, "decision"),
    ]
    newest = api.get(
        f"/sessions/{session.pk}/events", {"order": "desc", "limit": 2, "before_seq": 14}
    ).json()
    assert [e["seq"] for e in newest["events"]] == [13, 12] and newest["has_more"] is True


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 1001},
        {"after_seq": -1},
        {"before_seq": 0},
        {"kind": "lunch"},
        {"tier": "eternal"},
        {"order": "sideways"},
    ],
)
def test_it_refuses_bad_slice_parameters_with_422(api, project, params):
    session = make_session(project)
    response = api.get(f"/sessions/{session.pk}/events", params)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"


def test_it_reads_a_fork_slice_in_a_bounded_number_of_queries(
    api, lineage, django_assert_max_num_queries
):
    grandchild = lineage[2]
    api.get(f"/sessions/{grandchild.pk}")  # the key's last_used_at is written once, here
    # Key, session, one keyset read per lineage segment (three), the ancestors' compaction
    # marks (one: a range compacted in an ancestor is named in the slice's `compacted`).
    with django_assert_max_num_queries(6):
        body = api.get(f"/sessions/{grandchild.pk}/events", {"limit": 1000}).json()
    assert len(body["events"]) == 26


@pytest.mark.parametrize(
    "moment",
    [
        "2026-03-04T05:06:07+00:00",  # no microseconds: isoformat writes none
        "2026-03-04T05:06:07.000001+00:00",
        "2026-12-31T23:59:59.999999+00:00",
        "1999-01-02T03:04:05.120000+00:00",
    ],
)
def test_the_apis_json_lines_are_byte_for_byte_the_loaded_rows_json(lineage, monkeypatch, moment):
    """The API's slice takes each event's JSON as made by the database (storage.segment_rows
    with as_json); it must be exactly what the loaded row (datetime, UUID, Decimal, content)
    gives through event_row_to_json, on every segment of a lineage, for timestamps with and
    without microseconds."""
    import datetime as dt

    from sessions_app.queries import slice_events
    from sessions_app.services import log
    from tests.sessions_app.event_json import event_row_to_json

    _, _, grandchild = lineage
    at = dt.datetime.fromisoformat(moment)
    monkeypatch.setattr(log.timezone, "now", lambda: at)
    append_events(grandchild, _drafts("timed", 3, 0), actor=Actor.system())
    awkward = 'quote " backslash \\ newline \n tab \t bell \u0007 é 😀 \u2028'
    append_events(
        grandchild,
        [
            EventDraft(
                kind="message",
                role='u"\\\n\u0007é😀',
                content={awkward: [awkward, 1.5, None, True]},
                idempotency_key=awkward,
            )
        ],
        actor=Actor.system(),
    )
    grandchild.refresh_from_db()
    for order in (False, True):
        loaded = slice_events(grandchild, limit=1000, newest_first=order)
        as_json = slice_events(grandchild, limit=1000, newest_first=order, as_json=True)
        assert as_json.rows == [] and len(as_json.lines) == len(loaded.rows) > 3
        assert as_json.lines == [event_row_to_json(r) for r in loaded.rows]
        assert as_json.has_more == loaded.has_more
    newest = slice_events(grandchild, limit=1, newest_first=True, as_json=True).lines[0]
    assert json.loads(newest)["created_at"] == moment
