"""Invariant 8: nothing is visible or writable across projects, by key or by user.

The session endpoints are enumerated from the API's routers, so an endpoint added without a row
in REQUESTS below fails this suite instead of going unchecked.
"""

import hashlib
import uuid

import pytest
from django.forms.models import model_to_dict

from config.api import api as ninja_api
from core.actors import Actor
from core.errors import NotFound, PermissionDeniedError
from core.models import AuditEntry, Role
from sessions_app.access import get_session_for_user
from sessions_app.models import Artifact, Blob, Event, Session, Snapshot
from sessions_app.services.events import EventDraft, append_events
from tests.conftest import ApiClient
from tests.factories import make_api_key, make_member, make_session, make_user

ABC_SHA256 = hashlib.sha256(b"ABC").hexdigest()

# (method, path) -> body; in an order in which the owner's calls all succeed.
# An artifact's PUT sends the file itself (bytes), not JSON.
REQUESTS: list[tuple[str, str, dict | bytes | None]] = [
    ("GET", "/sessions/{session_id}", None),
    ("POST", "/sessions/{session_id}/events", {"events": [{"kind": "note", "content": {}}]}),
    ("POST", "/sessions/{session_id}/blobs", {"blobs": [{"data": "QUJD"}]}),  # b"ABC"
    ("POST", "/sessions/{session_id}/blobs/lookup", {"sha256": [ABC_SHA256], "data": True}),
    ("GET", "/sessions/{session_id}/blobs/{sha256}", None),
    ("PUT", "/sessions/{session_id}/artifacts/{name}", b"ABC"),
    ("GET", "/sessions/{session_id}/artifacts", None),
    ("GET", "/sessions/{session_id}/artifacts/{name}", None),
    ("GET", "/sessions/{session_id}/export/artifacts", None),
    ("DELETE", "/sessions/{session_id}/artifacts/{name}", None),
    ("GET", "/sessions/{session_id}/events", None),
    ("GET", "/sessions/{session_id}/state", None),
    ("POST", "/sessions/{session_id}/snapshots", {}),
    ("POST", "/sessions/{session_id}/fork", {"at_seq": 1}),
    ("GET", "/sessions/{session_id}/export", None),
    ("GET", "/sessions/{session_id}/tasks", None),
    ("POST", "/sessions/{session_id}/pause", {"reason": "outsider"}),
    ("POST", "/sessions/{session_id}/resume", {"reason": "outsider"}),
    (
        "POST",
        "/sessions/{session_id}/handoffs",
        {"kind": "question", "payload": {"question": "outsider?"}},
    ),
    ("POST", "/sessions/{session_id}/hold", {"reason": "outsider"}),
    ("DELETE", "/sessions/{session_id}/hold", None),
    ("POST", "/sessions/{session_id}/close", {"reason": "outsider"}),
    ("DELETE", "/sessions/{session_id}", None),  # last, with its fork (QUERIES)
]
# Query strings the owner's requests need to succeed (the session has a fork by then).
QUERIES = {("DELETE", "/sessions/{session_id}"): "?with_forks=true"}
# Admin-scoped key routes: an agent key of another project is refused by its scope first (403,
# which says nothing about the session); an admin key of another project gets the 404.
ADMIN_ONLY = {("POST", "/sessions/{session_id}/hold"), ("DELETE", "/sessions/{session_id}/hold")}


def _session_endpoints() -> set[tuple[str, str]]:
    """(method, path) of every operation on one session, from every router of the API."""
    found = set()
    for _prefix, router in ninja_api._routers:
        for path, path_view in router.path_operations.items():
            if not path.startswith("/sessions/{session_id}"):
                continue
            for operation in path_view.operations:
                found.update((method, path) for method in operation.methods)
    return found


def _world() -> tuple:
    """Every row a request could change, to prove refused requests changed none."""
    return (
        [model_to_dict(s) for s in Session.objects.order_by("pk")],
        Event.objects.count(),
        Snapshot.objects.count(),
        Blob.objects.count(),
        Artifact.objects.count(),
        AuditEntry.objects.count(),
    )


def _url(path: str, session_id) -> str:
    return path.format(session_id=session_id, sha256=ABC_SHA256, name="report.txt")


def _call(client, method: str, path: str, body: dict | bytes | None):
    if isinstance(body, bytes):
        return client.client.generic(
            method, f"/api/v1{path}", data=body, content_type="text/plain", headers=client.headers
        )
    if method == "GET":
        return client.get(path)
    if method == "DELETE":
        return client.delete(path)
    return client.post(path, body)


def _scope(client) -> str:
    return client.get("/project").json()["key_scope"]


def test_it_has_a_request_for_every_session_endpoint():
    assert _session_endpoints() == {(m, p) for m, p, _ in REQUESTS}, (
        "A session endpoint was added or removed: add it to REQUESTS (and so to the "
        "cross-project check) or drop it from there."
    )


def test_it_answers_404_to_another_projects_key_on_every_session_endpoint(api, other_api, project):
    session = make_session(project, external_id="ext-1")
    append_events(
        session, [EventDraft(kind="fact", content={"key": "k", "value": 1})], actor=Actor.system()
    )
    before = _world()
    other_scope = _scope(other_api)
    for method, path, body in REQUESTS:
        url = _url(path, session.pk) + QUERIES.get((method, path), "")
        response = _call(other_api, method, url, body)
        if (method, path) in ADMIN_ONLY and other_scope == "agent":
            assert response.status_code == 403, (method, path, response.content)
            assert _call(other_api, method, _url(path, uuid.uuid4()), body).json() == (
                response.json()
            )
            continue
        assert response.status_code == 404, (method, path, response.content)
        error = response.json()["error"]
        assert set(error) == {"code", "message", "detail"}
        assert error["code"] == "not_found", (method, path)
        # Indistinguishable from a session that does not exist.
        unknown = _call(other_api, method, _url(path, uuid.uuid4()), body)
        assert unknown.status_code == 404
        assert unknown.json()["error"]["message"] == error["message"]
    assert _world() == before

    # The same requests from the owner succeed: the 404s were the project boundary, not the
    # requests themselves.
    owner_admin = ApiClient(make_api_key(project, scope="admin")[1])
    for method, path, body in REQUESTS:
        client = owner_admin if (method, path) in ADMIN_ONLY else api
        url = _url(path, session.pk) + QUERIES.get((method, path), "")
        response = _call(client, method, url, body)
        assert response.status_code in (200, 201), (method, path, response.content)


def test_it_lists_and_opens_sessions_only_within_the_keys_project(api, other_api, project):
    mine = make_session(project, external_id="shared-ext")
    assert [s["id"] for s in api.get("/sessions").json()["sessions"]] == [str(mine.pk)]
    assert other_api.get("/sessions").json()["sessions"] == []
    assert other_api.get("/sessions", {"q": "anything"}).json()["sessions"] == []

    # The same external_id in another project is another session, not a way in.
    theirs = other_api.post("/sessions", {"agent": "a", "external_id": "shared-ext"})
    assert theirs.status_code == 201
    assert theirs.json()["id"] != str(mine.pk)
    assert Session.objects.get(pk=theirs.json()["id"]).project_id != project.pk
    mine.refresh_from_db()
    assert mine.project_id == project.pk


def test_it_finds_full_text_matches_only_within_the_project(api, other_api, project):
    session = make_session(project)
    append_events(
        session,
        [EventDraft(kind="message", content={"text": "zebra crossing"})],
        actor=Actor.system(),
    )
    assert [s["id"] for s in api.get("/sessions", {"q": "zebra"}).json()["sessions"]] == [
        str(session.pk)
    ]
    assert other_api.get("/sessions", {"q": "zebra"}).json()["sessions"] == []


def test_it_hides_sessions_from_users_outside_the_project(project, other_project):
    session = make_session(project)
    outsider = make_member(other_project, role=Role.ADMIN)
    with pytest.raises(NotFound):
        get_session_for_user(outsider, session.pk)
    with pytest.raises(NotFound):
        get_session_for_user(make_user(), session.pk)
    viewer = make_member(project, role=Role.VIEWER)
    assert get_session_for_user(viewer, session.pk)[0] == session
    with pytest.raises(PermissionDeniedError):
        get_session_for_user(viewer, session.pk, Role.OPERATOR)
