"""GET /sessions with several external_ids and include=events (issue 27 §2): what lets an
adapter read a session, its last events and its companions' state in one request (the ADK
adapter's get_session: the session, the app's and the user's shared state)."""

import jsonschema_rs
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.actors import Actor
from sessions_app.api import MAX_EXTERNAL_ID_LOOKUPS
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.sessions import fork_session
from tests.api.test_unknown_fields import OPENAPI
from tests.factories import make_session

TESTER = Actor.system("tests")
PAGE_SCHEMA = jsonschema_rs.validator_for(
    {"$ref": "#/components/schemas/SessionListOut", "components": OPENAPI["components"]},
    validate_formats=True,
)


def _page(api, params) -> dict:
    response = api.get("/sessions", params)
    assert response.status_code == 200, response.content
    body = response.json()
    errors = [error.message for error in PAGE_SCHEMA.iter_errors(body)]
    assert not errors, errors  # the body is what the document says
    return body


def _notes(session, count: int, tag: str = "n") -> None:
    drafts = [EventDraft(kind="note", content={"text": f"{tag}{i}"}) for i in range(count)]
    append_events(session, drafts, actor=TESTER)


def test_several_external_ids_are_looked_up_in_one_request(api, project, other_project):
    a = make_session(project, external_id="adk:s:a")
    b = make_session(project, external_id="adk:a:app")
    make_session(project, external_id="adk:u:app:other")
    make_session(other_project, external_id="adk:u:app:me")  # another project's: not seen

    body = _page(
        api,
        [
            ("external_id", "adk:s:a"),
            ("external_id", "adk:a:app"),
            ("external_id", "adk:u:app:me"),
            ("external_id", "nothing"),
        ],
    )

    assert sorted(s["id"] for s in body["sessions"]) == sorted([str(a.pk), str(b.pk)])
    assert body["next_cursor"] is None
    # One id is the look-up it always was: that session or an empty page, nothing opened.
    assert [s["id"] for s in _page(api, {"external_id": "adk:s:a"})["sessions"]] == [str(a.pk)]
    assert _page(api, {"external_id": "nothing"})["sessions"] == []


def test_other_projects_keys_find_nothing_of_this_project(project, other_api):
    make_session(project, external_id="mine")
    assert (
        _page(other_api, {"external_id": ["mine"], "include": ["state", "events"]})["sessions"]
        == []
    )


def test_include_events_gives_each_session_its_last_events_oldest_first(api, project):
    long = make_session(project, external_id="long")
    _notes(long, 30)
    short = make_session(project, external_id="short")
    _notes(short, 3)
    empty = make_session(project, external_id="empty")

    body = _page(
        api,
        {
            "external_id": ["long", "short", "empty"],
            "include": ["state", "events"],
            "events_limit": 10,
        },
    )

    listed = {s["external_id"]: s for s in body["sessions"]}
    for name, session in (("long", long), ("short", short), ("empty", empty)):
        tail = api.get(f"/sessions/{session.pk}/events", {"order": "desc", "limit": 10}).json()
        assert listed[name]["events"] == tail["events"][::-1], name
        assert listed[name]["events_has_more"] is tail["has_more"], name
        assert listed[name]["state"] == {} and listed[name]["state_error"] is None
    assert [e["seq"] for e in listed["long"]["events"]] == list(range(21, 31))
    assert listed["long"]["events_has_more"] is True
    assert [e["content"]["text"] for e in listed["short"]["events"]] == ["n0", "n1", "n2"]
    assert listed["short"]["events_has_more"] is False
    assert listed["empty"]["events"] == []

    # Without include=events, none of its keys; events_limit defaults to 50.
    plain = _page(api, {"external_id": "long", "include": "state"})["sessions"][0]
    assert not {"events", "events_has_more"} & set(plain)
    default = _page(api, {"external_id": "long", "include": "events"})["sessions"][0]
    assert len(default["events"]) == 30 and "state" not in default


def test_a_forks_events_include_its_parents_prefix(api, project):
    parent = make_session(project)
    _notes(parent, 5, "p")
    fork = fork_session(parent, at_seq=3, actor=TESTER, external_id="fork")
    _notes(fork, 2, "f")

    (item,) = _page(api, {"external_id": "fork", "include": "events"})["sessions"]

    assert [(e["seq"], e["content"]["text"]) for e in item["events"]] == [
        (1, "p0"),
        (2, "p1"),
        (3, "p2"),
        (4, "f0"),
        (5, "f1"),
    ]
    assert {e["session_id"] for e in item["events"][:3]} == {str(parent.pk)}


@pytest.mark.parametrize(
    ("params", "loc"),
    [
        ({"external_id": [f"id-{n}" for n in range(MAX_EXTERNAL_ID_LOOKUPS + 1)]}, "external_id"),
        ({"external_id": ""}, "external_id"),
        ({"external_id": "x" * 201}, "external_id"),
        ({"include": "events", "events_limit": 0}, "events_limit"),
        ({"include": "events", "events_limit": 201}, "events_limit"),
        ({"include": "events", "events_limit": "ten"}, "events_limit"),
        ({"include": ["events", "tasks"]}, "include"),
    ],
)
def test_bad_look_ups_are_a_422_naming_the_parameter(api, project, params, loc):
    response = api.get("/sessions", params)
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert set(error) == {"code", "message", "detail"}
    # A list parameter's items are named with ninja's schema argument and their index
    # (["query", "filters", "include", 1]), a scalar's as ["query", name].
    where = error["detail"][0]["loc"]
    assert where[0] == "query" and loc in where, where


def test_the_document_declares_the_look_ups_and_the_included_events():
    operation = OPENAPI["paths"]["/api/v1/sessions"]["get"]
    parameters = {p["name"]: p for p in operation["parameters"] if p["in"] == "query"}
    (ids, _null) = parameters["external_id"]["schema"]["anyOf"]
    assert ids["type"] == "array" and ids["maxItems"] == MAX_EXTERNAL_ID_LOOKUPS
    (included, _null) = parameters["include"]["schema"]["anyOf"]
    assert included["items"]["enum"] == ["state", "events"]
    assert parameters["events_limit"]["schema"]["maximum"] == 200
    item = OPENAPI["components"]["schemas"]["ListedSessionOut"]
    assert {"events", "events_has_more"} <= set(item["properties"])
    assert not {"events", "events_has_more"} & set(item["required"])


def test_include_events_reads_the_roots_of_a_page_in_one_statement(api, project):
    """A page's root sessions' events come from one statement, however many they are; each
    fork's through its lineage."""
    for n in range(12):
        _notes(make_session(project, external_id=f"root-{n}"), 3)

    def statements(limit: int) -> int:
        ask = {"include": "events", "limit": limit, "events_limit": 2}
        _page(api, ask)  # the key cached
        with CaptureQueriesContext(connection) as captured:
            body = _page(api, ask)
        assert len(body["sessions"]) == limit
        assert all(len(s["events"]) == 2 and s["events_has_more"] for s in body["sessions"])
        return len(captured)

    few, many = statements(2), statements(12)
    assert few == many, (few, many)
    with CaptureQueriesContext(connection) as captured:
        _page(api, {"limit": 12})
    assert many == len(captured) + 1


def test_a_compacted_sessions_listed_events_are_the_events_endpoints(api, project):
    """Compaction removed transient events (a gap in the seqs): the listed tail is read as
    the events endpoint reads it, not by position."""
    from retention_app.services.compaction import compact_session
    from sessions_app.services.lifecycle import close_session

    session = make_session(project, external_id="compacted")
    for n in range(6):
        append_events(
            session,
            [
                EventDraft(kind="note", content={"text": f"n{n}"}),
                EventDraft(kind="fact", content={"key": f"k{n}", "value": n}),
            ],
            actor=TESTER,
        )
    close_session(session, actor=TESTER, reason="done")
    session.refresh_from_db()
    assert compact_session(session, actor=TESTER).compaction is not None

    (item,) = _page(api, {"external_id": "compacted", "include": "events", "events_limit": 4})[
        "sessions"
    ]
    tail = api.get(f"/sessions/{session.pk}/events", {"order": "desc", "limit": 4}).json()
    assert item["events"] == tail["events"][::-1]
    assert item["events_has_more"] is tail["has_more"]
