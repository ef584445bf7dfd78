"""Forks are copy-on-write: a fork's history is the parent's prefix plus its own events."""

import pytest
from django.db import DataError

from core.actors import Actor
from core.models import AuditEntry
from sessions_app.models import Event, Session
from sessions_app.services.events import EventDraft, append_events
from tests.factories import make_session


def _append(session: Session, drafts: list[EventDraft]) -> None:
    for start in range(0, len(drafts), 1000):
        append_events(session, drafts[start : start + 1000], actor=Actor.system())


def _seqs_and_contents(api, session_id, **params) -> list[tuple[int, dict]]:
    rows: list[tuple[int, dict]] = []
    after = 0
    while True:
        body = api.get(
            f"/sessions/{session_id}/events", {"after_seq": after, "limit": 1000, **params}
        ).json()
        rows += [(e["seq"], e["content"]) for e in body["events"]]
        if not body["has_more"]:
            return rows
        after = rows[-1][0]


def test_it_forks_a_10000_event_session_without_copying_events(api, project):
    parent = make_session(project, title="long")
    _append(
        parent,
        [EventDraft(kind="state", content={"i": i, f"k{i % 3}": i}) for i in range(1, 10_001)],
    )
    rows_before = Event.objects.count()

    response = api.post(f"/sessions/{parent.pk}/fork", {"at_seq": 5000, "title": "branch"})

    assert response.status_code == 201
    assert Event.objects.count() == rows_before  # copy-on-write: no event row inserted
    fork = Session.objects.get(pk=response.json()["id"])
    assert (fork.parent_id, fork.fork_seq, fork.head_seq, fork.status, fork.title) == (
        parent.pk,
        5000,
        5000,
        "open",
        "branch",
    )
    assert response.json()["lineage"] == {
        "parent_id": str(parent.pk),
        "fork_seq": 5000,
        "ancestry": [{"session_id": str(parent.pk), "upto_seq": 5000}],
    }
    assert AuditEntry.objects.filter(action="session.fork", target_id=str(fork.pk)).exists()

    api.post(
        f"/sessions/{fork.pk}/events",
        {"events": [{"kind": "state", "content": {"own": True, "k0": None}}]},
    )
    assert Event.objects.count() == rows_before + 1

    tail = api.get(f"/sessions/{fork.pk}/events", {"after_seq": 4997}).json()
    assert [e["seq"] for e in tail["events"]] == [4998, 4999, 5000, 5001]
    assert tail["events"][2]["content"] == {"i": 5000, "k2": 5000}  # the parent's row
    assert tail["events"][2]["session_id"] == str(parent.pk)
    assert tail["events"][3]["content"] == {"own": True, "k0": None}
    assert tail["head_seq"] == 5001

    state = api.get(f"/sessions/{fork.pk}/state").json()
    assert state["seq"] == 5001
    assert state["state"] == {"i": 5000, "k1": 4999, "k2": 5000, "own": True}
    # The parent is untouched by the fork's writes.
    parent_state = api.get(f"/sessions/{parent.pk}/state").json()
    assert parent_state["state"] == {"i": 10000, "k0": 9999, "k1": 10000, "k2": 9998}
    assert api.get(f"/sessions/{parent.pk}").json()["head_seq"] == 10000


def test_it_forks_a_fork_and_reads_through_both_ancestors(api, project):
    root = make_session(project)
    _append(root, [EventDraft(kind="note", content={"root": i}) for i in range(1, 11)])
    child_id = api.post(f"/sessions/{root.pk}/fork", {"at_seq": 6}).json()["id"]
    api.post(
        f"/sessions/{child_id}/events",
        {"events": [{"kind": "note", "content": {"child": i}} for i in range(7, 10)]},
    )
    grandchild = api.post(f"/sessions/{child_id}/fork", {"at_seq": 8})
    assert grandchild.status_code == 201
    grandchild_id = grandchild.json()["id"]
    assert grandchild.json()["lineage"]["ancestry"] == [
        {"session_id": str(root.pk), "upto_seq": 6},
        {"session_id": child_id, "upto_seq": 8},
    ]
    api.post(
        f"/sessions/{grandchild_id}/events",
        {"events": [{"kind": "note", "content": {"grandchild": i}} for i in range(9, 11)]},
    )

    assert _seqs_and_contents(api, grandchild_id) == (
        [(i, {"root": i}) for i in range(1, 7)]
        + [(7, {"child": 7}), (8, {"child": 8})]
        + [(9, {"grandchild": 9}), (10, {"grandchild": 10})]
    )
    assert _seqs_and_contents(api, child_id) == (
        [(i, {"root": i}) for i in range(1, 7)] + [(i, {"child": i}) for i in range(7, 10)]
    )
    assert _seqs_and_contents(api, root.pk) == [(i, {"root": i}) for i in range(1, 11)]

    # Forking the grandchild inside the root's prefix needs only the root.
    deep = api.post(f"/sessions/{grandchild_id}/fork", {"at_seq": 4}).json()
    assert deep["lineage"]["ancestry"] == [{"session_id": str(root.pk), "upto_seq": 4}]
    assert deep["lineage"]["parent_id"] == grandchild_id
    assert _seqs_and_contents(api, deep["id"]) == [(i, {"root": i}) for i in range(1, 5)]


def test_it_rewinds_by_forking_at_an_earlier_seq(api, project):
    session = make_session(project)
    api.post(
        f"/sessions/{session.pk}/events",
        {
            "events": [
                {"kind": "state", "content": {"plan": "A"}},
                {"kind": "fact", "content": {"key": "city", "value": "Oslo"}},
                {"kind": "state", "content": {"plan": "B"}},
                {"kind": "fact", "content": {"key": "city", "value": "Rome"}},
            ]
        },
    )
    rewound = api.post(f"/sessions/{session.pk}/fork", {"at_seq": 2}).json()
    state = api.get(f"/sessions/{rewound['id']}/state").json()
    assert state["state"] == {"plan": "A"}
    assert state["facts"] == {"city": {"value": "Oslo", "seq": 2}}

    api.post(
        f"/sessions/{rewound['id']}/events",
        {"events": [{"kind": "state", "content": {"plan": "C"}}]},
    )
    assert api.get(f"/sessions/{rewound['id']}/state").json()["state"] == {"plan": "C"}
    assert api.get(f"/sessions/{session.pk}/state").json()["state"] == {"plan": "B"}

    empty = api.post(f"/sessions/{session.pk}/fork", {"at_seq": 0}).json()
    assert empty["head_seq"] == 0
    assert api.get(f"/sessions/{empty['id']}/events").json()["events"] == []


@pytest.mark.parametrize("at_seq", [-1, 5, 10_000])
def test_it_refuses_a_fork_outside_the_log_and_creates_nothing(api, project, at_seq):
    session = make_session(project)
    api.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}] * 4})
    sessions_before = Session.objects.count()
    response = api.post(f"/sessions/{session.pk}/fork", {"at_seq": at_seq})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"
    assert Session.objects.count() == sessions_before
    assert not AuditEntry.objects.filter(action="session.fork").exists()


def _statements(captured) -> list[str]:
    return [q["sql"].split(" ", 1)[0] for q in captured.captured_queries]


def test_a_fork_writes_its_session_audit_and_outbox_rows_in_one_statement(
    api, transactional_db, project
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from core.models import OutboxMessage

    parent = make_session(project, title="p")
    _append(parent, [EventDraft(kind="note") for _ in range(3)])
    assert api.get(f"/sessions/{parent.pk}").status_code == 200  # the key's last_used_at set
    with CaptureQueriesContext(connection) as captured:
        response = api.post(f"/sessions/{parent.pk}/fork", {"at_seq": 2})
    assert response.status_code == 201, response.content
    fork = Session.objects.get(pk=response.json()["id"])
    # (the key comes from this process's cache, confirmed in Redis: core.keycache) the parent
    # read and locked in one statement (against a compaction in flight; scoped to the key's
    # project), ONE insert for the three rows and the look-up of the parent's task links
    # (tasks_app's reaction: a fork keeps them), in one transaction; then the relay's claim.
    assert _statements(captured) == [
        "BEGIN",
        "SELECT",
        "WITH",
        "SELECT",
        "COMMIT",
        "BEGIN",
        "UPDATE",
        "COMMIT",
    ]
    assert (fork.parent_id, fork.fork_seq, fork.head_seq, fork.status) == (parent.pk, 2, 2, "open")
    assert fork.created_at is not None and fork.updated_at is not None
    entry = AuditEntry.objects.get(action="session.fork", target_id=str(fork.pk))
    assert entry.detail == {"parent": str(parent.pk), "at_seq": 2}
    message = OutboxMessage.objects.get(type="session.opened", payload__session_id=str(fork.pk))
    assert message.payload["fork_seq"] == 2
    assert message.relayed_at is not None  # relayed after the commit


def test_a_failing_fork_insert_writes_none_of_its_rows(api, transactional_db, project, monkeypatch):
    """The three rows are one statement: a failure in the last one leaves no session behind."""
    from core.models import OutboxMessage

    parent = make_session(project)
    sessions, audits, outbox = (
        Session.objects.count(),
        AuditEntry.objects.count(),
        OutboxMessage.objects.count(),
    )
    from core import domain_events
    from sessions_app.services import sessions as sessions_service

    def bad_outbox(event):
        message = domain_events.outbox_message(event)
        message.type = "x" * 500  # longer than the column: the database refuses this row
        return message

    monkeypatch.setattr(sessions_service, "outbox_message", bad_outbox)
    with pytest.raises(DataError, match="value too long"):
        sessions_service.fork_session(parent, at_seq=0, actor=Actor.system("t"))
    assert Session.objects.count() == sessions
    assert AuditEntry.objects.count() == audits
    assert OutboxMessage.objects.count() == outbox
