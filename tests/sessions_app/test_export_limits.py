"""Exports are bounded per project: slots held by running exports, 429 past them, freed when an
export ends or its client goes away; the output is what the ORM-side reader gives, byte for byte.

The export reads through its own connection (the rows must be committed: transactional tests).
"""

import json
import socket
import time
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from core.actors import Actor
from core.models import AuditEntry
from sessions_app import storage
from sessions_app.models import Event, Session
from sessions_app.queries import iter_events_json
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.sessions import fork_session
from tests.conftest import ApiClient
from tests.factories import make_api_key, make_project, make_session
from tests.servers import asgi_server
from tests.sessions_app.event_json import event_row_to_json

pytestmark = pytest.mark.django_db(transaction=True)


def read_all(response) -> bytes:
    async def collect() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(collect)()


def close_unread(response) -> None:
    """What the server does when the client goes away mid-download: close the stream."""

    async def close() -> None:
        stream = response.streaming_content
        await anext(stream)  # started: the export is running
        await stream.aclose()

    async_to_sync(close)()


def orm_side_export(session) -> bytes:
    """The log as the ORM-side reader (the slice endpoint's path) gives it, serialised the same."""
    return "".join(event_row_to_json(row) + "\n" for row in iter_events_json(session)).encode()


def assert_export_busy(response, limit: int) -> None:
    assert response.status_code == 429
    assert response["Content-Type"] == "application/json"
    assert response["Retry-After"] == "10"
    assert response.json()["error"] == {
        "code": "export_busy",
        "message": f"This project already runs {limit} exports, its limit; retry when one ends.",
        "detail": {"limit": limit, "retry_after": 10},
    }


def test_it_exports_byte_for_byte_what_the_orm_side_reader_gives(api, project):
    parent = make_session(project)
    actor = Actor.system()
    drafts = [
        EventDraft(kind="message", role="user", content={"text": f'é ✓ "q" \\ {i}'}, tokens=i)
        for i in range(1, 2600)  # more than one FETCH batch
    ]
    drafts += [
        EventDraft(kind="fact", content={"key": "k", "value": [1, None, {"ü": 2.5}]}),
        EventDraft(kind="note", content={}, cost=Decimal("0.125"), idempotency_key="idem-1"),
        EventDraft(kind="state", content={"a": {"b": None}}),
    ]
    append_events(parent, drafts, actor=actor)
    # Timestamps as the loader of bench/ingest.py writes them: whole seconds (isoformat() then
    # has no fraction), and a fraction with trailing zeros (it keeps all six digits).
    head = parent.head_seq  # 2,602
    storage.insert_events(
        [
            Event(
                session_id=parent.pk,
                seq=head + 1,
                kind="note",
                tier="transient",
                content={"t": 1},
                created_at=datetime(2025, 1, 1, 0, 0, 1, tzinfo=UTC),
            ),
            Event(
                session_id=parent.pk,
                seq=head + 2,
                kind="note",
                tier="transient",
                content={"t": 2},
                created_at=datetime(2025, 1, 1, 0, 0, 2, 120000, tzinfo=UTC),
            ),
        ]
    )
    Session.objects.filter(pk=parent.pk).update(head_seq=head + 2)
    parent.refresh_from_db()
    fork = fork_session(parent, at_seq=2500, actor=actor)
    append_events(fork, [EventDraft(kind="note", content={"f": 1})], actor=actor)

    for session in (parent, fork):
        response = api.get(f"/sessions/{session.pk}/export")
        assert response.status_code == 200
        header, body = read_all(response).split(b"\n", 1)
        assert json.loads(header)["session"]["id"] == str(session.pk)
        assert body == orm_side_export(session)  # event lines byte-identical, after the header
        assert body.count(b"\n") == session.head_seq
        if session is parent:
            assert b'"created_at":"2025-01-01T00:00:01+00:00"' in body
            assert b'"created_at":"2025-01-01T00:00:02.120000+00:00"' in body
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert lines[2499]["session_id"] == str(parent.pk)  # a fork includes its parent's prefix
    assert lines[2500] == {**lines[2500], "seq": 2501, "session_id": str(fork.pk)}


@override_settings(SWITCHBOARD_EXPORTS_PER_PROJECT=2)
def test_running_exports_hold_the_projects_slots_and_free_them_when_they_end(api, project):
    session = make_session(project)
    append_events(session, [EventDraft(kind="note", content={"n": 1})], actor=Actor.system())
    other_project = make_project()
    other_api = ApiClient(make_api_key(other_project)[1])
    other_session = make_session(other_project)

    first = api.get(f"/sessions/{session.pk}/export")
    second = api.get(f"/sessions/{session.pk}/export")
    assert (first.status_code, second.status_code) == (200, 200)

    refused = api.get(f"/sessions/{session.pk}/export")
    assert_export_busy(refused, limit=2)
    assert AuditEntry.objects.filter(action="session.export").count() == 2  # refused: not recorded
    # Another project's exports do not share the slots.
    assert other_api.get(f"/sessions/{other_session.pk}/export").status_code == 200

    assert read_all(first).split(b"\n", 1)[1] == orm_side_export(session)  # read to its end
    third = api.get(f"/sessions/{session.pk}/export")
    assert third.status_code == 200
    assert_export_busy(api.get(f"/sessions/{session.pk}/export"), limit=2)

    close_unread(second)  # its client went away: the slot is free too
    assert api.get(f"/sessions/{session.pk}/export").status_code == 200


@override_settings(SWITCHBOARD_EXPORTS_PER_PROJECT=1)
def test_the_dashboard_refuses_past_the_limit_with_a_page_and_retry_after(project):
    from django.test import Client

    from core.models import Role
    from tests.factories import make_member

    session = make_session(project)
    viewer = make_member(project, Role.VIEWER)
    client = Client()
    client.force_login(viewer)
    url = f"/sessions/{session.pk}/export.jsonl"
    running = client.get(url)
    assert running.status_code == 200
    refused = client.get(url)
    assert refused.status_code == 429
    assert refused["Retry-After"] == "10"
    assert b"exports" in refused.content and b"Traceback" not in refused.content
    read_all(running)
    assert client.get(url).status_code == 200


def test_slot_keys_keep_projects_and_slots_apart():
    keys = {storage.export_slot_key(p, s) for p in (1, 2, 2**40 - 1) for s in (0, 1, 255)}
    assert len(keys) == 9
    assert all(0 < key < 2**63 for key in keys)  # one PostgreSQL bigint
    with pytest.raises(ValueError):
        storage.export_slot_key(2**40, 0)
    with pytest.raises(ValueError):
        storage.export_slot_key(1, 256)


# --- Against a real server: concurrent downloads over TCP -----------------------------------


class Download:
    """A raw HTTP/1.1 export request whose body is read only when asked (its client stalls)."""

    def __init__(self, base_url: str, path: str, key: str) -> None:
        host, port = base_url.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n\r\n".encode()
        )
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.sock.recv(65536)
            assert chunk, "the server closed the connection before answering"
            data += chunk
        head, _, self.rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:])
        }

    def body(self) -> bytes:
        """The rest of the response (a JSON error's body, or a whole chunked download)."""
        data = self.rest
        while True:
            if self.headers.get("content-length") and len(data) >= int(
                self.headers["content-length"]
            ):
                break
            if data.endswith(b"\r\n0\r\n\r\n") or data.startswith(b"0\r\n\r\n"):
                break
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                break
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def wait_for_status(make, status: int, timeout: float = 15.0) -> "Download":
    deadline = time.monotonic() + timeout
    while True:
        download = make()
        if download.status == status or time.monotonic() > deadline:
            return download
        download.close()
        time.sleep(0.2)


def test_a_real_server_refuses_the_third_export_and_frees_slots_as_downloads_end():
    """Two stalled downloads (a log far larger than the socket buffers) hold both slots: the
    third is refused with 429 while another project exports freely; a client that hangs up
    frees its slot, and so does a download read to its end."""
    project, other_project = make_project(), make_project()
    key, other_key = make_api_key(project)[1], make_api_key(other_project)[1]
    session, other_session = make_session(project), make_session(other_project)
    text = "x" * 4000  # ~12 MB of JSON Lines: more than any socket buffer holds
    for _ in range(3):
        append_events(
            session,
            [EventDraft(kind="note", content={"text": text}) for _ in range(1000)],
            actor=Actor.system(),
        )
    append_events(other_session, [EventDraft(kind="note", content={})], actor=Actor.system())
    path = f"/api/v1/sessions/{session.pk}/export"

    with asgi_server(SWITCHBOARD_EXPORTS_PER_PROJECT="2") as base:
        first, second = Download(base, path, key), Download(base, path, key)
        assert (first.status, second.status) == (200, 200)
        try:
            refused = Download(base, path, key)
            assert refused.status == 429
            assert refused.headers["retry-after"] == "10"
            assert b'"code": "export_busy"' in refused.body()
            refused.close()

            other = Download(base, f"/api/v1/sessions/{other_session.pk}/export", other_key)
            assert other.status == 200
            other.close()

            first.close()  # hangs up mid-download: the server notices and frees its slot
            third = wait_for_status(lambda: Download(base, path, key), 200)
            assert third.status == 200

            # Both slots busy again (second and third); reading one to its end frees one.
            assert Download(base, path, key).status == 429
            body = second.body()
            assert body.count(b'"kind":"note"') == 3000
            fourth = wait_for_status(lambda: Download(base, path, key), 200)
            assert fourth.status == 200
            fourth.close()
            third.close()
        finally:
            first.close()
            second.close()
