"""external_id: the project's name for a session, taken by opening or by forking.

Opening (POST /sessions) with an external_id already held by a session of another agent is
409 external_id_taken naming that agent, not that session. Forking (POST /sessions/{id}/fork)
takes an external_id, a title and metadata, and is idempotent by the external_id as opening
is: the same fork again (that parent, that seq) is the fork made first, 200; an external_id
any other session holds is 409. (Racing processes: test_concurrent_keys.py.)
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.models import AuditEntry
from sessions_app.models import Event, Session
from tests.factories import make_session


def _taken(response) -> dict:
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["code"] == "external_id_taken"
    return error["detail"]


@pytest.fixture
def parent(api, project):
    session = make_session(project, title="main", metadata={"team": "red"})
    response = api.post(
        f"/sessions/{session.pk}/events",
        {"events": [{"kind": "note"}, {"kind": "note"}, {"kind": "note"}]},
    )
    assert response.status_code == 201
    return session


# --- Opening --------------------------------------------------------------------------------


def test_opening_another_agents_external_id_is_409_naming_that_agent(api, project):
    held = api.post("/sessions", {"agent": "billing-bot", "external_id": "ticket-1"}).json()

    response = api.post("/sessions", {"agent": "support-bot", "external_id": "ticket-1"})

    assert _taken(response) == {
        "external_id": "ticket-1",
        "session_id": held["id"],
        "agent": "billing-bot",
    }
    assert "billing-bot" in response.json()["error"]["message"]
    assert Session.objects.filter(project=project).count() == 1
    assert AuditEntry.objects.filter(action="session.open").count() == 1
    # The holder's own agent still gets its session back.
    again = api.post("/sessions", {"agent": "billing-bot", "external_id": "ticket-1"})
    assert (again.status_code, again.json()["id"]) == (200, held["id"])


def test_opening_a_forks_external_id_with_its_agent_answers_the_fork(api, parent):
    fork = api.post(f"/sessions/{parent.pk}/fork", {"at_seq": 2, "external_id": "f-1"}).json()

    same = api.post("/sessions", {"agent": "test-agent", "external_id": "f-1"})
    other = api.post("/sessions", {"agent": "other-agent", "external_id": "f-1"})

    assert (same.status_code, same.json()["id"]) == (200, fork["id"])
    assert _taken(other)["agent"] == "test-agent"


# --- Forking with an identity ---------------------------------------------------------------


def test_a_fork_takes_an_external_id_title_and_metadata(api, parent):
    response = api.post(
        f"/sessions/{parent.pk}/fork",
        {"at_seq": 2, "external_id": "retry-1", "title": "retry", "metadata": {"attempt": 2}},
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["external_id"], body["title"], body["metadata"]) == (
        "retry-1",
        "retry",
        {"attempt": 2},
    )
    fork = Session.objects.get(pk=body["id"])
    assert (fork.external_id, fork.parent_id, fork.fork_seq, fork.metadata) == (
        "retry-1",
        parent.pk,
        2,
        {"attempt": 2},
    )
    entry = AuditEntry.objects.get(action="session.fork", target_id=str(fork.pk))
    assert entry.detail == {"parent": str(parent.pk), "at_seq": 2, "external_id": "retry-1"}
    # Found by it, as any session is.
    listed = api.get("/sessions", {"external_id": "retry-1"}).json()["sessions"]
    assert [s["id"] for s in listed] == [body["id"]]


def test_a_fork_without_them_copies_the_parents_metadata_and_names_itself(api, parent):
    body = api.post(f"/sessions/{parent.pk}/fork", {"at_seq": 1}).json()

    assert (body["external_id"], body["title"], body["metadata"]) == (
        None,
        "Fork of main",
        {"team": "red"},
    )
    empty = api.post(f"/sessions/{parent.pk}/fork", {"at_seq": 1, "metadata": {}}).json()
    assert empty["metadata"] == {}


def test_the_same_fork_again_is_the_fork_made_first(api, parent):
    first = api.post(
        f"/sessions/{parent.pk}/fork",
        {"at_seq": 2, "external_id": "retry-1", "title": "retry", "metadata": {"a": 1}},
    )
    assert first.status_code == 201
    events = Event.objects.count()

    # Its title and metadata are the first request's, whatever a repeat says (as opening).
    # Found by a look-up, without locking the parent's row (appends and compaction take it).
    with CaptureQueriesContext(connection) as queries:
        again = api.post(
            f"/sessions/{parent.pk}/fork",
            {"at_seq": 2, "external_id": "retry-1", "title": "other", "metadata": {"b": 2}},
        )
    assert not [q for q in queries.captured_queries if "FOR NO KEY UPDATE" in q["sql"]]

    assert again.status_code == 200, again.content
    same = ("id", "external_id", "title", "metadata", "lineage", "created_at", "head_seq")
    assert {k: again.json()[k] for k in same} == {k: first.json()[k] for k in same}
    assert first.json()["title"] == "retry" and first.json()["metadata"] == {"a": 1}
    assert Session.objects.filter(parent=parent).count() == 1
    assert AuditEntry.objects.filter(action="session.fork").count() == 1
    assert Event.objects.count() == events


@pytest.mark.parametrize("case", ["other seq", "other parent", "opened session", "root of fork"])
def test_an_external_id_another_session_holds_is_409_and_forks_nothing(api, project, parent, case):
    sibling = make_session(project)
    api.post(f"/sessions/{sibling.pk}/events", {"events": [{"kind": "note"}] * 2})
    held = api.post(f"/sessions/{parent.pk}/fork", {"at_seq": 2, "external_id": "x"}).json()
    holder, at, fork_from = {
        "other seq": (held, 1, parent.pk),
        "other parent": (held, 2, sibling.pk),
        "opened session": (None, 1, parent.pk),
        "root of fork": (held, 2, held["id"]),
    }[case]
    if holder is None:
        opened = api.post("/sessions", {"agent": "test-agent", "external_id": "y"}).json()
        holder, external_id = opened, "y"
    else:
        external_id = "x"
    sessions = Session.objects.count()

    response = api.post(f"/sessions/{fork_from}/fork", {"at_seq": at, "external_id": external_id})

    detail = _taken(response)
    assert (detail["external_id"], detail["session_id"]) == (external_id, holder["id"])
    assert (detail["parent_id"], detail["fork_seq"]) == (
        holder["lineage"]["parent_id"],
        holder["lineage"]["fork_seq"],
    )
    assert Session.objects.count() == sessions
    assert AuditEntry.objects.filter(action="session.fork").count() == 1


def test_a_fork_of_an_unknown_session_is_404_whatever_its_external_id(api, other_api, parent):
    api.post(f"/sessions/{parent.pk}/fork", {"at_seq": 2, "external_id": "mine"})

    for external_id in ("mine", "new"):
        response = other_api.post(
            f"/sessions/{parent.pk}/fork", {"at_seq": 2, "external_id": external_id}
        )
        assert response.status_code == 404, (external_id, response.content)
    assert not Session.objects.filter(external_id="new").exists()


@pytest.mark.parametrize(
    "body",
    [
        {"at_seq": 1, "external_id": ""},
        {"at_seq": 1, "external_id": "x" * 201},
        {"at_seq": 1, "external_id": "a\x00"},
        {"at_seq": 1, "metadata": []},
        {"at_seq": 1, "metadata": {"a": "\x00"}},
        {"at_seq": 1, "title": "t" * 301},
    ],
)
def test_a_fork_refuses_an_identity_it_cannot_store_with_422(api, parent, body):
    sessions = Session.objects.count()
    response = api.post(f"/sessions/{parent.pk}/fork", body)
    assert response.status_code == 422, response.content
    assert Session.objects.count() == sessions
