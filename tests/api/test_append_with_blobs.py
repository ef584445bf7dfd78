"""An append that carries blobs (POST /sessions/{id}/events with `blobs` beside `events`): one
request where a checkpoint took two (POST …/blobs, then the append). Both are stored in one
transaction or neither: a refused event stores no blob, a bad blob stores no event. The blobs
take the checks POST …/blobs makes, and a retried append (its idempotency keys) still writes
nothing again."""

import base64
import hashlib

import pytest
from django.db import DatabaseError

from core.actors import Actor
from sessions_app.models import Blob, Event, Session
from sessions_app.services import events as events_service
from sessions_app.services.blobs import MAX_BLOBS_PER_CALL
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import close_session
from tests.factories import make_session

TESTER = Actor.system("tests")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def note(key: str | None = None, **content) -> dict:
    event = {"kind": "note", "content": content}
    if key is not None:
        event["idempotency_key"] = key
    return event


def append(api, session_id, events, *blobs: bytes, **fields):
    body = {"events": events, **fields}
    if blobs:
        body["blobs"] = [{"data": b64(b)} for b in blobs]
    return api.post(f"/sessions/{session_id}/events", body)


def test_it_stores_the_blobs_with_the_events(api, project):
    session = make_session(project)
    value, other = b"a channel value", "héllo ☃".encode()

    response = append(api, session.pk, [note(values=[sha(value), sha(other)])], value, other)

    assert response.status_code == 201, response.json()
    assert response.json()["head_seq"] == 1
    assert Event.objects.get(session=session).content == {"values": [sha(value), sha(other)]}
    assert set(Blob.objects.filter(session=session).values_list("sha256", "size")) == {
        (sha(value), len(value)),
        (sha(other), len(other)),
    }
    assert api.get(f"/sessions/{session.pk}/blobs/{sha(other)}").content == other
    # Held already: not stored again, and the events are written all the same.
    again = append(api, session.pk, [note(n=2)], value)
    assert again.status_code == 201
    assert Blob.objects.filter(session=session).count() == 2


def test_a_fork_does_not_store_again_what_its_parent_holds(api, project):
    parent = make_session(project)
    inherited = b"from the parent"
    assert append(api, parent.pk, [note()], inherited).status_code == 201
    fork = api.post(f"/sessions/{parent.pk}/fork", {"at_seq": 1}).json()["id"]

    response = append(api, fork, [note()], inherited, b"own")

    assert response.status_code == 201
    assert list(Blob.objects.filter(session_id=fork).values_list("sha256", flat=True)) == [
        sha(b"own")
    ]


@pytest.mark.parametrize(
    "refusal, code",
    [
        ("closed", "session_not_writable"),
        ("stale expected_head_seq", "head_seq_mismatch"),
        ("system kind", "invalid_input"),
        ("reused idempotency key", "idempotency_key_reused"),
    ],
)
def test_a_refused_append_stores_no_blob(api, project, refusal, code):
    session = make_session(project)
    first = EventDraft(kind="note", content={"n": 1}, idempotency_key="k")
    append_events(session, [first], actor=TESTER)
    events, fields = [note(n=2)], {}
    if refusal == "closed":
        close_session(session, actor=TESTER, reason="done")
    elif refusal == "stale expected_head_seq":
        fields["expected_head_seq"] = 0
    elif refusal == "system kind":
        events = [note(n=2), {"kind": "lifecycle", "content": {}}]
    else:
        events = [note("k", n=99)]  # the key's event said n=1
    head_before = Session.objects.get(pk=session.pk).head_seq

    response = append(api, session.pk, events, b"never stored", **fields)

    assert response.json()["error"]["code"] == code, response.json()
    if refusal == "system kind":
        assert response.json()["error"]["detail"]["kind"] == "lifecycle"
    assert not Blob.objects.exists()
    assert Session.objects.get(pk=session.pk).head_seq == head_before


def test_a_failure_storing_the_blobs_writes_no_event(project, monkeypatch):
    """The other way round: events written, then the blobs fail: the events go too."""
    session = make_session(project)

    def failing(*args, **kwargs):
        raise DatabaseError("the disk is full")

    monkeypatch.setattr(events_service, "store_blobs_locked", failing)
    with pytest.raises(DatabaseError):
        append_events(
            session, [EventDraft(kind="note", content={})], actor=TESTER, blobs=[b"value"]
        )

    assert not Event.objects.filter(session=session).exists()
    assert Session.objects.get(pk=session.pk).head_seq == 0


def test_a_bad_blob_stores_no_event_and_names_its_field(api, project):
    session = make_session(project)
    body = {
        "events": [note(n=1)],
        "blobs": [{"data": b64(b"fine")}, {"data": "not base64!"}],
    }

    response = api.post(f"/sessions/{session.pk}/events", body)

    assert response.status_code == 422, response.json()
    assert response.json() == {
        "error": {
            "code": "invalid_input",
            "message": "Blob data must be base64 (standard alphabet, padded).",
            "detail": {"field": "blobs[1].data"},
        }
    }
    assert not Event.objects.filter(session=session).exists()
    assert not Blob.objects.exists()


def test_a_blob_over_the_limit_is_413_and_stores_no_event(api, project, settings):
    settings.SWITCHBOARD_MAX_BLOB_BYTES = 100
    session = make_session(project)

    response = append(api, session.pk, [note(n=1)], b"ok", b"y" * 101)

    assert response.status_code == 413
    assert response.json()["error"]["detail"] == {
        "field": "blobs[1].data",
        "limit": 100,
        "size": 101,
    }
    assert not Event.objects.filter(session=session).exists()
    assert not Blob.objects.exists()


@pytest.mark.parametrize(
    "blobs, field",
    [
        ([{"data": "QUJD"}] * (MAX_BLOBS_PER_CALL + 1), f"at most {MAX_BLOBS_PER_CALL} items"),
        ([{"data": "QUJD", "sha256": "0" * 64}], "sha256"),  # the server names it
        ([{"data": 12}], "data"),
    ],
    ids=["too many", "a name", "not a string"],
)
def test_blobs_the_schema_refuses_store_no_event(api, project, blobs, field):
    session = make_session(project)

    response = api.post(f"/sessions/{session.pk}/events", {"events": [note()], "blobs": blobs})

    assert response.status_code == 422, response.json()
    assert response.json()["error"]["code"] in {"invalid_input", "validation_error"}
    assert field in response.content.decode()
    assert not Event.objects.filter(session=session).exists()
    assert not Blob.objects.exists()


def test_another_projects_key_stores_nothing(other_api, project):
    session = make_session(project)

    response = append(other_api, session.pk, [note()], b"planted")

    assert response.status_code == 404
    assert not Blob.objects.exists()


def test_a_retried_append_writes_nothing_again(api, project):
    session = make_session(project)
    events = [note("step-1", n=1), note("step-2", n=2)]
    first = append(api, session.pk, events, b"one", b"two")
    assert first.status_code == 201

    retry = append(api, session.pk, events, b"one", b"two")

    assert retry.status_code == 200, retry.json()
    assert [e["replayed"] for e in retry.json()["events"]] == [True, True]
    assert retry.json()["events"] == [{**e, "replayed": True} for e in first.json()["events"]]
    assert Event.objects.filter(session=session).count() == 2
    assert Blob.objects.filter(session=session).count() == 2
    # Answered so even once the session is closed, as a retry of events alone is.
    close_session(session, actor=TESTER, reason="done")
    assert append(api, session.pk, events, b"one", b"two").status_code == 200


def test_a_replay_stores_the_blobs_its_first_sending_lacked(api, project):
    session = make_session(project)
    events = [note("step-1", n=1)]
    assert append(api, session.pk, events).status_code == 201

    retry = append(api, session.pk, events, b"late")

    assert retry.status_code == 201  # something was written: the blob
    assert retry.json()["events"][0]["replayed"] is True
    assert Blob.objects.filter(session=session, sha256=sha(b"late")).exists()
    assert Event.objects.filter(session=session).count() == 1


def test_a_partial_replay_stores_the_blobs_with_the_new_events(api, project):
    session = make_session(project)
    assert append(api, session.pk, [note("a", n=1)]).status_code == 201

    response = append(api, session.pk, [note("a", n=1), note("b", n=2)], b"new")

    assert response.status_code == 201
    assert [e["replayed"] for e in response.json()["events"]] == [True, False]
    assert Blob.objects.filter(session=session, sha256=sha(b"new")).exists()


def test_the_schema_describes_the_blobs_of_an_append(client):
    schema = client.get("/api/v1/openapi.json").json()
    append_in = schema["components"]["schemas"]["AppendIn"]
    blobs = append_in["properties"]["blobs"]

    assert blobs["type"] == "array"
    assert blobs["maxItems"] == MAX_BLOBS_PER_CALL
    assert blobs["items"] == {"$ref": "#/components/schemas/BlobIn"}
    assert "blobs" not in append_in.get("required", [])
    assert append_in["additionalProperties"] is False
    blob_in = schema["components"]["schemas"]["BlobIn"]
    assert blob_in["additionalProperties"] is False and blob_in["required"] == ["data"]
