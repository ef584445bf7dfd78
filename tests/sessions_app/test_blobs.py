"""Blobs (POST /sessions/{id}/blobs, POST …/blobs/lookup, GET …/blobs/{sha256}): bytes stored
once per session under their SHA-256, read by forks from their ancestors, deleted with the
session, kept by compaction; bad input refused with nothing stored. The races (the same bytes
from several processes, a store racing the session's deletion) run in several processes."""

import base64
import hashlib
import time

import pytest

from core.actors import Actor
from retention_app.services.compaction import compact_session
from sessions_app.blob_api import LOOKUP_BYTE_BUDGET
from sessions_app.models import Blob, Session
from sessions_app.services.blobs import MAX_LOOKUP_NAMES, blob_records, find_blobs, store_blobs
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import close_session
from tests.conftest import ApiClient
from tests.factories import make_api_key, make_session
from tests.multiproc import ProcessPool, barrier

TESTER = Actor.system("tests")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def store(api: ApiClient, session_id, *contents: bytes):
    return api.post(
        f"/sessions/{session_id}/blobs", {"blobs": [{"data": b64(c)} for c in contents]}
    )


def test_bytes_are_stored_once_under_their_hash_and_read_back(api, project):
    session = make_session(project)
    first, second = b"x" * 1000, "héllo ☃".encode()

    response = store(api, session.pk, first, second, first)

    assert response.status_code == 201, response.json()
    assert response.json()["blobs"] == [
        {"sha256": sha(first), "size": 1000, "created": True},
        {"sha256": sha(second), "size": len(second), "created": True},
        {"sha256": sha(first), "size": 1000, "created": False},  # the same bytes, once
    ]
    again = store(api, session.pk, second)
    assert again.status_code == 200
    assert again.json()["blobs"] == [{"sha256": sha(second), "size": len(second), "created": False}]
    assert Blob.objects.filter(session=session).count() == 2

    raw = api.get(f"/sessions/{session.pk}/blobs/{sha(second)}")
    assert raw.status_code == 200 and raw.content == second
    assert raw["Content-Type"] == "application/octet-stream"
    assert raw["X-Content-Type-Options"] == "nosniff"
    assert raw["Content-Disposition"].startswith("attachment")

    unknown = sha(b"never stored")
    looked = api.post(
        f"/sessions/{session.pk}/blobs/lookup",
        {"sha256": [unknown, sha(second), sha(first)], "data": True},
    )
    assert looked.status_code == 200
    assert looked.json() == {
        "blobs": [
            {"sha256": sha(second), "size": len(second), "data": b64(second)},
            {"sha256": sha(first), "size": 1000, "data": b64(first)},
        ],
        "missing": [unknown],
        "not_sent": [],
    }
    names_only = api.post(f"/sessions/{session.pk}/blobs/lookup", {"sha256": [sha(first)]})
    assert names_only.json()["blobs"] == [{"sha256": sha(first), "size": 1000, "data": None}]


def test_a_lookup_sends_at_most_its_byte_budget_and_names_the_rest(api, project, settings):
    session = make_session(project)
    size = settings.SWITCHBOARD_MAX_BLOB_BYTES
    contents = [bytes([i]) * size for i in range(LOOKUP_BYTE_BUDGET // size + 1)]
    for content in contents:
        assert store(api, session.pk, content).status_code == 201

    looked = api.post(
        f"/sessions/{session.pk}/blobs/lookup",
        {"sha256": [sha(c) for c in contents], "data": True},
    ).json()

    sent = [b for b in looked["blobs"] if b["data"] is not None]
    assert len(sent) == LOOKUP_BYTE_BUDGET // size
    assert all(base64.b64decode(b["data"]) == contents[i] for i, b in enumerate(sent))
    assert looked["not_sent"] == [sha(contents[-1])]
    assert looked["blobs"][-1] == {"sha256": sha(contents[-1]), "size": size, "data": None}


def test_a_lookup_of_many_blobs_is_one_statement_in_the_order_asked(
    project, django_assert_num_queries
):
    session = make_session(project)
    contents = [f"message {i:04}".encode() * 20 for i in range(300)]
    store_blobs(session, contents)
    asked = [sha(c) for c in reversed(contents)] + ["0" * 64, sha(contents[0])]
    budget = 10 * len(contents[0])

    with django_assert_num_queries(1):
        found = find_blobs(session, asked, with_data=True, byte_budget=budget)

    assert [b["sha256"] for b in found.found] == asked[:300]  # once each, in order
    assert [base64.b64decode(b["data"]) for b in found.found[:10]] == contents[:-11:-1]
    assert all(b["data"] is None for b in found.found[10:])
    assert found.not_sent == asked[10:300]
    assert found.missing == ["0" * 64]


def records(*blobs: bytes | int) -> bytes:
    """The bytes answer: each blob as its 4-byte big-endian length and itself; an int alone."""
    return b"".join(
        b.to_bytes(4, "big") if isinstance(b, int) else len(b).to_bytes(4, "big") + b for b in blobs
    )


def test_a_lookup_answers_bytes_to_a_request_that_accepts_them_else_json(api, project, settings):
    session = make_session(project)
    size = settings.SWITCHBOARD_MAX_BLOB_BYTES
    small, empty = "héllo ☃".encode(), b""
    big = [bytes([i]) * size for i in range(LOOKUP_BYTE_BUDGET // size + 1)]
    assert store(api, session.pk, small, empty).status_code == 201
    for content in big:
        assert store(api, session.pk, content).status_code == 201
    unknown = sha(b"never stored")
    # Asked twice, answered once; in the order first asked.
    asked = [sha(small), unknown, sha(empty), sha(small)] + [sha(c) for c in big]
    path = f"/sessions/{session.pk}/blobs/lookup"
    accept = "application/vnd.switchboard.blobs"

    answer = api.post(path, {"sha256": asked, "data": True}, HTTP_ACCEPT=accept)

    assert answer.status_code == 200
    assert answer["Content-Type"] == accept
    assert "Accept" in answer["Vary"]
    # The small one and the big ones share the budget: the last two big ones are past it.
    not_sent = 0xFFFFFFFE
    assert answer.content == records(small, 0xFFFFFFFF, empty, *big[:-2], not_sent, not_sent)
    # Preferred over JSON, or not at all.
    preferred = api.post(
        path,
        {"sha256": [sha(small)], "data": True},
        HTTP_ACCEPT=f"{accept}, application/json;q=0.5",
    )
    assert preferred.content == records(small)
    for other in ("*/*", "application/json", f"application/json, {accept};q=0.5"):
        json_answer = api.post(path, {"sha256": [sha(small)], "data": True}, HTTP_ACCEPT=other)
        assert json_answer["Content-Type"] == "application/json", other
        assert "Accept" in json_answer["Vary"]
        assert json_answer.json()["blobs"][0]["data"] == b64(small)
    # Names only: there are no bytes to send, so JSON.
    names_only = api.post(path, {"sha256": [sha(small)]}, HTTP_ACCEPT=accept)
    assert names_only.json()["blobs"] == [{"sha256": sha(small), "size": len(small), "data": None}]


def test_the_bytes_answer_checks_the_key_and_the_names_as_json_does(other_api, api, project):
    session = make_session(project)
    path = f"/sessions/{session.pk}/blobs/lookup"
    accept = "application/vnd.switchboard.blobs"
    name = store(api, session.pk, b"secret").json()["blobs"][0]["sha256"]

    other = other_api.post(path, {"sha256": [name], "data": True}, HTTP_ACCEPT=accept)
    bad = api.post(path, {"sha256": ["nope"], "data": True}, HTTP_ACCEPT=accept)

    assert other.status_code == 404 and other.json()["error"]["code"] == "not_found"
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_input"


def test_a_name_holding_a_comma_is_refused_by_the_lookup_itself(project):
    """The names reach PostgreSQL as one comma-separated string: one holding a comma would
    read as two. The API refuses such a name (422, above); the lookup refuses it too."""
    session = make_session(project)
    (stored,) = store_blobs(session, [b"held"])

    with pytest.raises(ValueError, match="comma"):
        find_blobs(session, [f"{stored.sha256},{stored.sha256}"], with_data=False, byte_budget=1)
    with pytest.raises(ValueError, match="comma"):
        blob_records(session, [f"{stored.sha256},{stored.sha256}"], byte_budget=1)


@pytest.mark.parametrize(
    "body, field",
    [
        ({"blobs": [{"data": "not base64!"}]}, "blobs[0].data"),
        ({"blobs": [{"data": "QUJD"}, {"data": "QUJDRA"}]}, "blobs[1].data"),  # unpadded
        ({"blobs": []}, "blobs"),
        ({"blobs": [{"data": "QUJD", "sha256": "0" * 64}]}, "sha256"),  # the server names it
        ({"blobs": [{"data": 12}]}, "data"),
    ],
)
def test_bad_blobs_are_refused_and_nothing_is_stored(api, project, body, field):
    session = make_session(project)

    response = api.post(f"/sessions/{session.pk}/blobs", body)

    assert response.status_code == 422, response.content
    assert response.json()["error"]["code"] in {"invalid_input", "validation_error"}
    assert field in response.content.decode()
    assert not Blob.objects.exists()


def test_a_blob_over_the_limit_is_413_naming_it(api, project, settings):
    settings.SWITCHBOARD_MAX_BLOB_BYTES = 100
    session = make_session(project)

    response = store(api, session.pk, b"ok", b"y" * 101)

    assert response.status_code == 413
    assert response.json()["error"]["detail"] == {
        "field": "blobs[1].data",
        "limit": 100,
        "size": 101,
    }
    assert not Blob.objects.exists()


def test_a_lookup_names_at_most_max_lookup_names_as_its_schema_says(api, client, project):
    session = make_session(project)
    names = [f"{i:064x}" for i in range(MAX_LOOKUP_NAMES + 1)]

    at_most = api.post(f"/sessions/{session.pk}/blobs/lookup", {"sha256": names[:-1]})
    too_many = api.post(f"/sessions/{session.pk}/blobs/lookup", {"sha256": names})

    assert at_most.status_code == 200 and len(at_most.json()["missing"]) == MAX_LOOKUP_NAMES
    assert too_many.status_code == 422
    schema = client.get("/api/v1/openapi.json").json()["components"]["schemas"]
    assert schema["BlobLookupIn"]["properties"]["sha256"]["maxItems"] == MAX_LOOKUP_NAMES


@pytest.mark.parametrize("bad", ["ABC", "0" * 63, "G" * 64, "A" * 64])
def test_a_malformed_name_is_422_and_an_unknown_one_404(api, project, bad):
    session = make_session(project)
    assert api.get(f"/sessions/{session.pk}/blobs/{bad}").status_code == 422
    lookup = api.post(f"/sessions/{session.pk}/blobs/lookup", {"sha256": [bad]})
    assert lookup.status_code == 422
    unknown = api.get(f"/sessions/{session.pk}/blobs/{sha(b'nothing')}")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "not_found"


def test_a_fork_reads_its_ancestors_blobs_and_they_do_not_read_its(api, project):
    parent = make_session(project)
    append_events(parent, [EventDraft(kind="note", content={})], actor=TESTER)
    inherited, own = b"from the parent", b"the fork's own"
    store(api, parent.pk, inherited)
    fork = api.post(f"/sessions/{parent.pk}/fork", {"at_seq": 1}).json()["id"]
    grandchild = api.post(f"/sessions/{fork}/fork", {"at_seq": 1}).json()["id"]

    assert api.get(f"/sessions/{grandchild}/blobs/{sha(inherited)}").content == inherited
    resent = store(api, fork, inherited, own).json()["blobs"]
    assert [b["created"] for b in resent] == [False, True]  # held by its parent already
    assert not Blob.objects.filter(session_id=fork, sha256=sha(inherited)).exists()
    assert api.get(f"/sessions/{parent.pk}/blobs/{sha(own)}").status_code == 404
    looked = api.post(f"/sessions/{parent.pk}/blobs/lookup", {"sha256": [sha(own)]}).json()
    assert looked["missing"] == [sha(own)]


def test_another_projects_key_finds_nothing(other_api, api, project):
    session = make_session(project)
    store(api, session.pk, b"secret")
    name = sha(b"secret")

    assert other_api.get(f"/sessions/{session.pk}/blobs/{name}").status_code == 404
    lookup = other_api.post(f"/sessions/{session.pk}/blobs/lookup", {"sha256": [name]})
    assert lookup.status_code == 404
    assert store(other_api, session.pk, b"planted").status_code == 404
    assert Blob.objects.count() == 1


def test_a_closed_session_takes_no_blobs_but_its_blobs_are_read(api, project):
    session = make_session(project)
    store(api, session.pk, b"kept")
    close_session(session, actor=TESTER, reason="done")

    refused = store(api, session.pk, b"late")

    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "session_not_writable"
    assert api.get(f"/sessions/{session.pk}/blobs/{sha(b'kept')}").content == b"kept"
    assert Blob.objects.count() == 1


def test_compaction_keeps_them_and_deletion_removes_them(api, project):
    session = make_session(project)
    append_events(
        session, [EventDraft(kind="note", content={"i": i}) for i in range(5)], actor=TESTER
    )
    store(api, session.pk, b"named by a checkpoint")
    close_session(session, actor=TESTER, reason="done")
    session.refresh_from_db()

    compact_session(session, actor=TESTER)
    assert Blob.objects.filter(session=session).count() == 1

    assert api.delete(f"/sessions/{session.pk}").status_code == 200
    assert not Blob.objects.filter(session_id=session.pk).exists()


# --- Races between processes ----------------------------------------------------------------

PROCESSES = 3


@pytest.fixture(scope="module")
def racers(django_db_setup):
    with ProcessPool(PROCESSES) as pool:
        yield pool


def store_same_bytes(raw_key: str, session_id: str) -> tuple[int, list]:
    from tests.conftest import ApiClient

    barrier().wait()
    response = store(ApiClient(raw_key), session_id, b"shared " * 1000, b"also shared")
    return response.status_code, response.json()["blobs"]


@pytest.mark.slow
def test_processes_storing_the_same_bytes_keep_one_copy(transactional_db, project, racers):
    _, raw_key = make_api_key(project)
    session = make_session(project)

    results = racers.run(store_same_bytes, [(raw_key, str(session.pk))] * PROCESSES)

    assert {status for status, _ in results} <= {200, 201}, results
    names = {(b["sha256"], b["size"]) for _, blobs in results for b in blobs}
    assert names == {(sha(b"shared " * 1000), 7000), (sha(b"also shared"), 11)}
    assert Blob.objects.filter(session=session).count() == 2


def store_until_gone(raw_key: str, session_id: str, role: str) -> list[tuple]:
    """In a child: the deleter waits a moment and deletes; the others store new blobs until the
    session is gone. Every status."""
    from tests.conftest import ApiClient

    client = ApiClient(raw_key)
    barrier().wait()
    if role == "delete":
        time.sleep(0.15)
        return [client.delete(f"/sessions/{session_id}").status_code]
    statuses = []
    for i in range(400):
        statuses.append(store(client, session_id, f"{role} {i}".encode() * 50).status_code)
        if statuses[-1] != 201:
            break
    return statuses


@pytest.mark.slow
def test_a_delete_racing_stores_leaves_no_blob_behind(transactional_db, project, racers):
    _, raw_key = make_api_key(project)
    session = make_session(project)

    results = racers.run(
        store_until_gone, [(raw_key, str(session.pk), role) for role in ("delete", "a", "b")]
    )

    assert results[0] == [200]
    stores = [status for statuses in results[1:] for status in statuses]
    assert set(stores) <= {201, 404}, results
    assert stores.count(201) >= 1 and stores[-1] == 404  # some landed, then gone
    assert not Session.objects.filter(pk=session.pk).exists()
    assert not Blob.objects.exists()
