"""GET /sessions (issue 24 §1): look-up by external_id, `metadata.<name>=<value>` filters,
has_pending_handoff, include=state (bounded queries for the page), unknown parameters refused.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.actors import Actor
from core.schemas import QUERY_PREFIXES
from handoffs_app.services.handoffs import cancel_handoff, request_handoff
from retention_app.services.compaction import compact_session
from sessions_app.models import Event, Session
from sessions_app.queries import metadata_matches
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import close_session
from sessions_app.services.sessions import fork_session
from sessions_app.services.state import take_snapshot
from tests.api.test_unknown_fields import OPENAPI
from tests.dashboard.test_deep_values import nested, store_before_the_bound
from tests.factories import make_session

TESTER = Actor.system("tests")


def _ids(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [s["id"] for s in response.json()["sessions"]]


def _append(session: Session, *drafts: EventDraft) -> None:
    append_events(session, list(drafts), actor=TESTER)


def _state(patch: dict) -> EventDraft:
    return EventDraft(kind="state", content=patch)


def _fact(key: str, value: object) -> EventDraft:
    return EventDraft(kind="fact", content={"key": key, "value": value})


def _note(text: str) -> EventDraft:
    return EventDraft(kind="note", content={"text": text})


# --- external_id ----------------------------------------------------------------------------


def test_it_looks_a_session_up_by_external_id_and_never_opens_one(
    api, other_api, project, other_project
):
    mine = make_session(project, external_id="ticket-1")
    make_session(project, external_id="ticket-2")
    make_session(project)
    theirs = make_session(other_project, external_id="ticket-1")

    assert _ids(api.get("/sessions", {"external_id": "ticket-1"})) == [str(mine.pk)]
    assert _ids(other_api.get("/sessions", {"external_id": "ticket-1"})) == [str(theirs.pk)]
    before = Session.objects.count()
    assert _ids(api.get("/sessions", {"external_id": "ticket-9"})) == []
    assert _ids(api.get("/sessions", {"external_id": "ticket"})) == []  # exact, no prefix
    assert Session.objects.count() == before


def test_a_look_up_by_external_ids_pages_and_composes_like_any_list(api, project):
    """The look-up by external_ids and metadata values alone is its own statement (the
    adapters' every open): newest first, a cursor past `limit`, and other filters still
    applied when given."""
    made = [
        make_session(project, external_id=f"t-{n}", metadata={"app": "x", "n": n}) for n in range(5)
    ]
    make_session(project, external_id="other")
    request_handoff(made[1], kind="question", payload={"question": "?"}, actor=TESTER)
    close_session(made[3], actor=TESTER)
    asked = [f"t-{n}" for n in range(5)]
    newest_first = [str(s.pk) for s in reversed(made)]

    first = api.get("/sessions", {"external_id": asked, "limit": 3})
    assert _ids(first) == newest_first[:3]
    rest = api.get(
        "/sessions", {"external_id": asked, "limit": 3, "cursor": first.json()["next_cursor"]}
    )
    assert _ids(rest) == newest_first[3:] and rest.json()["next_cursor"] is None
    assert _ids(api.get("/sessions", {"external_id": asked})) == newest_first
    waiting = {"external_id": asked, "has_pending_handoff": "true"}
    assert _ids(api.get("/sessions", waiting)) == [str(made[1].pk)]
    assert _ids(api.get("/sessions", {"external_id": asked, "status": "closed"})) == [
        str(made[3].pk)
    ]
    assert api.get("/sessions", {"external_id": "t-0", "limit": 0}).status_code == 422

    by_app = api.get("/sessions", {"metadata.app": "x", "limit": 4})
    assert _ids(by_app) == newest_first[:4] and by_app.json()["next_cursor"]
    both = {"metadata.app": "x", "metadata.n": ["1", "3"], "external_id": asked}
    assert _ids(api.get("/sessions", both)) == []  # every value must hold
    one = {"metadata.app": "x", "metadata.n": "3", "external_id": ["t-3", "t-4"]}
    assert _ids(api.get("/sessions", one)) == [str(made[3].pk)]
    assert _ids(api.get("/sessions", {"metadata.app": "x", "status": "closed"})) == [
        str(made[3].pk)
    ]


# --- metadata.<name>=<value> ----------------------------------------------------------------


def test_metadata_filters_match_exactly_and_and_together(api, project, other_project):
    both = make_session(project, metadata={"channel": "email", "tier": "gold", "n": {"x": 1}})
    email = make_session(project, metadata={"channel": "email", "tier": "silver"})
    make_session(project, metadata={"channel": "chat", "tier": "gold"})
    make_session(project)
    make_session(other_project, metadata={"channel": "email", "tier": "gold"})

    assert set(_ids(api.get("/sessions", {"metadata.channel": "email"}))) == {
        str(both.pk),
        str(email.pk),
    }
    assert _ids(api.get("/sessions", {"metadata.channel": "email", "metadata.tier": "gold"})) == [
        str(both.pk)
    ]
    assert _ids(api.get("/sessions", {"metadata.channel": "emai"})) == []  # no prefix match
    assert _ids(api.get("/sessions", {"metadata.channel": "Email"})) == []
    # Top-level keys only: a dot is part of the name, nested objects are not looked into.
    assert _ids(api.get("/sessions", {"metadata.n.x": "1"})) == []
    # Repeated, each value must hold.
    assert _ids(api.get("/sessions", {"metadata.tier": ["gold", "silver"]})) == []
    # With the other filters.
    assert _ids(api.get("/sessions", {"metadata.tier": "silver", "status": "open"})) == [
        str(email.pk)
    ]


def test_a_value_that_spells_a_json_number_or_literal_also_matches_it(api, project):
    number = make_session(project, metadata={"priority": 3, "vip": True, "gone": None})
    text = make_session(project, metadata={"priority": "3", "vip": "true", "gone": "null"})
    decimal = make_session(project, metadata={"priority": 3.0, "vip": False})
    padded = make_session(project, metadata={"priority": "03", "vip": "yes"})

    assert set(_ids(api.get("/sessions", {"metadata.priority": "3"}))) == {
        str(number.pk),
        str(text.pk),
        str(decimal.pk),
    }
    assert set(_ids(api.get("/sessions", {"metadata.vip": "true"}))) == {
        str(number.pk),
        str(text.pk),
    }
    assert _ids(api.get("/sessions", {"metadata.vip": "false"})) == [str(decimal.pk)]
    assert set(_ids(api.get("/sessions", {"metadata.gone": "null"}))) == {
        str(number.pk),
        str(text.pk),
    }
    # "03" is not a JSON number: the string only.
    assert _ids(api.get("/sessions", {"metadata.priority": "03"})) == [str(padded.pk)]
    assert _ids(api.get("/sessions", {"metadata.priority": "3.5"})) == []
    # Not a JSON number: a string only (and no database error).
    assert _ids(api.get("/sessions", {"metadata.priority": "1e99999"})) == []


@pytest.mark.parametrize("value", ["email", "3"])
def test_the_metadata_filter_can_be_served_by_the_gin_index(db, value):
    # The containment as built (both forms of a number too) is one the GIN index answers; on
    # a table this small the planner would rather walk a project index, so none is asked.
    qs = Session.objects.filter(metadata_matches("channel", value))
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = qs.explain()
    assert "session_metadata_path" in plan and "Filter" not in plan, plan


@pytest.mark.parametrize(
    ("query", "loc"),
    [
        ("metadata.=x", "metadata."),
        (f"metadata.{'k' * 201}=x", f"metadata.{'k' * 201}"),
        (f"metadata.k={'v' * 1001}", "metadata.k"),
        ("&".join(f"metadata.k{i}=v" for i in range(21)), "metadata."),
    ],
)
def test_a_bad_metadata_filter_is_a_422_naming_it(api, project, query, loc):
    response = api.get(f"/sessions?{query}")
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert [problem["loc"] for problem in error["detail"]] == [["query", loc]]


def test_a_nul_character_in_a_metadata_filter_is_a_422(api, project):
    response = api.get("/sessions", {"metadata.k": "a\x00"})
    assert response.status_code == 422, response.content
    assert response.json()["error"]["detail"]["field"] == "metadata.k"


# --- has_pending_handoff ----------------------------------------------------------------------


def test_has_pending_handoff_filters_both_ways(api, other_api, project, other_project):
    waiting = make_session(project, title="waiting")
    request_handoff(waiting, kind="question", payload={"question": "?"}, actor=TESTER)
    withdrawn = make_session(project, title="withdrawn")
    cancel_handoff(
        request_handoff(withdrawn, kind="takeover", payload={}, actor=TESTER).handoff,
        actor=TESTER,
    )
    plain = make_session(project, title="plain")
    theirs = make_session(other_project)
    request_handoff(theirs, kind="question", payload={"question": "?"}, actor=TESTER)

    assert _ids(api.get("/sessions", {"has_pending_handoff": "true"})) == [str(waiting.pk)]
    assert set(_ids(api.get("/sessions", {"has_pending_handoff": "false"}))) == {
        str(withdrawn.pk),
        str(plain.pk),
    }
    assert len(_ids(api.get("/sessions"))) == 3
    assert _ids(other_api.get("/sessions", {"has_pending_handoff": "true"})) == [str(theirs.pk)]


# --- include=state ----------------------------------------------------------------------------


def _worked_sessions(project, count: int) -> list[Session]:
    """`count` sessions of several shapes: a snapshot then events after it, a fork (its state
    partly its parent's), one with no folded events at all."""
    made: list[Session] = []
    while len(made) < count:
        root = make_session(project, title=f"root {len(made)}")
        _append(root, _state({"stage": "triage", "n": len(made)}), _fact("colour", "blue"))
        take_snapshot(root, 2, reason="agent")
        _append(root, _state({"stage": "refund", "extra": {"a": 1}}), _note("x"))
        _append(root, _fact("colour", "red"), _state({"extra": None}))
        root.refresh_from_db()
        fork = fork_session(root, at_seq=3, actor=TESTER)
        _append(fork, _fact("size", 9), _state({"forked": True}))
        empty = make_session(project, title="empty")
        made.extend([root, fork, empty])
    return made[:count]


def test_include_state_gives_each_session_its_state_and_facts_at_head(api, project):
    sessions = _worked_sessions(project, 3)
    page = api.get("/sessions", {"include": "state"})
    assert page.status_code == 200, page.content
    listed = {s["id"]: s for s in page.json()["sessions"]}
    assert set(listed) == {str(s.pk) for s in sessions}
    for session_id, item in listed.items():
        expected = api.get(f"/sessions/{session_id}/state").json()
        assert (item["state"], item["facts"], item["state_error"]) == (
            expected["state"],
            expected["facts"],
            None,
        )
    root, fork, empty = (listed[str(s.pk)] for s in sessions)
    assert root["state"] == {"stage": "refund", "n": 0}
    assert root["facts"]["colour"] == {"value": "red", "seq": 5}
    assert fork["state"] == {"stage": "refund", "n": 0, "extra": {"a": 1}, "forked": True}
    assert set(fork["facts"]) == {"colour", "size"}
    assert (empty["state"], empty["facts"]) == ({}, {})

    # Without include=state, none of its keys.
    plain = api.get("/sessions").json()["sessions"][0]
    assert not {"state", "facts", "state_error"} & set(plain)


def test_include_state_reads_through_a_compaction_and_into_a_fork(api, project):
    # Compaction removed the transient state events (the root's up to its fork point): only
    # the snapshot it left holds them, so a fold that skipped the snapshot would come out short.
    root = make_session(project, title="compacted")
    for n in range(12):
        _append(root, _state({f"k{n}": n}), _note(f"n{n}"), _fact(f"f{n % 3}", n))
    close_session(root, actor=TESTER, reason="done")
    root.refresh_from_db()
    fork = fork_session(root, at_seq=20, actor=TESTER, title="fork")
    _append(fork, _state({"k0": None, "forked": True}), _note("own"), _fact("f0", "fork"))
    close_session(fork, actor=TESTER, reason="done")
    # Both compacted: the fork's state is its own compaction snapshot, not its parent's one
    # folded with its own (now removed) state event.
    for session in (root, fork):
        session.refresh_from_db()
        assert compact_session(session, actor=TESTER).compaction is not None
    assert not Event.objects.filter(session=root, kind="state", seq__lte=20).exists()
    assert not Event.objects.filter(session=fork, kind="state").exists()

    listed = {s["title"]: s for s in api.get("/sessions", {"include": "state"}).json()["sessions"]}
    for title, session in (("compacted", root), ("fork", fork)):
        expected = api.get(f"/sessions/{session.pk}/state").json()
        assert (listed[title]["state"], listed[title]["facts"]) == (
            expected["state"],
            expected["facts"],
        )
    assert listed["compacted"]["state"] == {f"k{n}": n for n in range(12)}
    assert listed["fork"]["state"] == {**{f"k{n}": n for n in range(1, 7)}, "forked": True}


def test_include_state_reads_a_page_in_a_bounded_number_of_queries(
    api, project, django_assert_max_num_queries
):
    def queries_for(limit: int, **include: str) -> int:
        api.get("/sessions", {"limit": limit, **include})  # the key cached
        with CaptureQueriesContext(connection) as captured:
            response = api.get("/sessions", {"limit": limit, **include})
        assert len(response.json()["sessions"]) == limit
        return len(captured)

    _worked_sessions(project, 12)  # roots with snapshots, forks, empty ones
    few, many = queries_for(2, include="state"), queries_for(12, include="state")
    assert few == many, (few, many)
    # On top of the page: one statement for the snapshots, one for the events.
    assert many == queries_for(12) + 2
    with django_assert_max_num_queries(many):
        api.get("/sessions", {"include": "state", "limit": 12})


def test_a_session_whose_state_cannot_be_read_does_not_fail_the_page(api, project):
    fine, poisoned = make_session(project, title="fine"), make_session(project, title="poisoned")
    _append(fine, _state({"ok": True}))
    _append(poisoned, _state({"stage": "ok"}))
    store_before_the_bound(poisoned, "state", nested(950))
    _append(poisoned, _fact("k", "v"))

    page = api.get("/sessions", {"include": "state"})
    assert page.status_code == 200, page.content
    listed = {s["title"]: s for s in page.json()["sessions"]}
    assert listed["fine"]["state"] == {"ok": True} and listed["fine"]["state_error"] is None
    bad = listed["poisoned"]
    assert bad["state"] is None and bad["facts"] is None
    error = bad["state_error"]
    assert error["code"] == "stored_value_too_deep" and "seq 2" in error["message"]
    assert set(error) == {"code", "message", "detail"}
    assert api.get(f"/sessions/{poisoned.pk}/state").status_code == 409  # the same refusal


def test_include_state_follows_the_pages(api, project):
    _worked_sessions(project, 5)
    seen: list[str] = []
    cursor = None
    while True:
        query = {"include": "state", "limit": 2, **({"cursor": cursor} if cursor else {})}
        body = api.get("/sessions", query).json()
        assert all("state" in s for s in body["sessions"])
        seen += [s["id"] for s in body["sessions"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 6  # two of each shape
    assert sorted(seen) == sorted(str(pk) for pk in project.sessions.values_list("pk", flat=True))


def test_include_takes_only_state_and_events(api, project):
    response = api.get("/sessions", {"include": "tasks"})
    assert response.status_code == 422, response.content
    # A list parameter: ninja names its item (["query", "filters", "include", 0]).
    assert response.json()["error"]["detail"][0]["loc"][-2:] == ["include", 0]


# --- Unknown parameters, and the document -----------------------------------------------------


@pytest.mark.parametrize("name", ["bogus", "metadata", "metadatax", "metadata_", "Metadata.k"])
def test_other_unknown_parameters_are_still_refused(api, project, name):
    response = api.get(f"/sessions?{name}=1&metadata.k=v")
    assert response.status_code == 422, response.content
    assert response.json()["error"]["detail"] == [
        {"type": "extra_forbidden", "loc": ["query", name], "msg": "Extra inputs are not permitted"}
    ]


def test_the_document_declares_the_new_parameters():
    operation = OPENAPI["paths"]["/api/v1/sessions"]["get"]
    names = {p["name"] for p in operation["parameters"] if p["in"] == "query"}
    assert {"external_id", "has_pending_handoff", "include"} <= names
    assert operation[QUERY_PREFIXES] == ["metadata."]
    assert "metadata.<name>=<value>" in operation["description"]
    item = OPENAPI["components"]["schemas"]["ListedSessionOut"]  # SessionListItemOut + holds
    assert not {"state", "facts", "state_error"} & set(item["required"])
    assert {"state", "facts", "state_error"} <= set(item["properties"])
