"""Artifacts under a real server (granian WSGI, as production serves the API) and real racing
processes (tests.multiproc): uploads racing deletions of the name and of the whole session
leave every stored row with its file and hash, and no file without its row."""

import hashlib
import http.client
import socket
import urllib.parse
from pathlib import Path

import httpx
import pytest
from django.core.files.storage import storages

from sessions_app.models import Artifact, Event, Session
from tests.factories import make_api_key, make_project, make_session
from tests.multiproc import barrier, run_in_processes
from tests.servers import wsgi_server

ROUNDS = 12
SIZE = 300 * 1024  # several of the service's 64 KiB reads, so a deletion can land mid-stream


@pytest.fixture
def server(transactional_db):
    with wsgi_server() as base_url:
        yield base_url


def _session_files(project_id, session_id) -> set[str]:
    root = Path(storages["artifacts"].location) / "artifacts" / str(project_id) / str(session_id)
    return {f"artifacts/{project_id}/{session_id}/{p.name}" for p in root.glob("*")}


def _payload(round_: int, who: int) -> bytes:
    return bytes([round_ % 256, who]) * (SIZE // 2)


def upload_each_round(base_url: str, key: str, session_id: str, who: int) -> list[int]:
    """In a child: for each round, wait for the others, then PUT a file; the statuses."""
    statuses = []
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}) as client:
        for round_ in range(ROUNDS):
            barrier().wait()
            response = client.put(
                f"/api/v1/sessions/{session_id}/artifacts/shared",
                content=_payload(round_, who),
                headers={"Content-Type": "application/octet-stream"},
                timeout=30,
            )
            statuses.append(response.status_code)
    return statuses


def delete_each_round(base_url: str, key: str, session_id: str, whole_session: bool) -> list[int]:
    """In a child: for each round, wait for the others, then DELETE the name (or the session)."""
    statuses = []
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}) as client:
        for round_ in range(ROUNDS):
            barrier().wait()
            if whole_session and round_ == ROUNDS // 2:
                response = client.delete(f"/api/v1/sessions/{session_id}", timeout=30)
            elif whole_session:
                response = client.get(f"/api/v1/sessions/{session_id}", timeout=30)
            else:
                response = client.delete(
                    f"/api/v1/sessions/{session_id}/artifacts/shared", timeout=30
                )
            statuses.append(response.status_code)
    return statuses


def test_uploads_racing_deletes_of_the_name_leave_rows_and_files_in_step(server):
    project = make_project()
    _, key = make_api_key(project)
    session = make_session(project)
    sid = str(session.pk)

    up_a, up_b, deletes = run_in_processes(
        _race,
        [("up", server, key, sid, 0), ("up", server, key, sid, 1), ("del", server, key, sid, 0)],
    )
    assert set(up_a + up_b) == {201}, (up_a, up_b)
    assert set(deletes) <= {200, 404}
    assert 200 in deletes

    rows = list(Artifact.objects.filter(session_id=session.pk).order_by("version"))
    assert [a.version for a in rows] == list(range(1, 2 * ROUNDS + 1))  # each save, once
    stored = [a for a in rows if a.deleted_at is None]
    # Every stored version has its file, with the bytes its row names; no other file is left.
    assert _session_files(project.pk, sid) == {a.storage_key for a in stored}
    for artifact in stored:
        with storages["artifacts"].open(artifact.storage_key) as handle:
            assert hashlib.sha256(handle.read()).hexdigest() == artifact.sha256
    # The log: one event per save and per deletion that found something, seqs gap-free.
    seqs = list(Event.objects.filter(session_id=session.pk).values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) == 2 * ROUNDS + deletes.count(200)


def test_uploads_racing_the_sessions_deletion_leave_nothing_behind(server):
    project = make_project()
    _, key = make_api_key(project)
    session = make_session(project)
    sid = str(session.pk)

    up_a, up_b, reads = run_in_processes(
        _race,
        [
            ("up", server, key, sid, 0),
            ("up", server, key, sid, 1),
            ("session", server, key, sid, 0),
        ],
    )
    assert reads[ROUNDS // 2] == 200  # the deletion
    assert set(up_a + up_b) <= {201, 404}
    assert 404 in up_a + up_b and 201 in up_a + up_b
    assert not Session.objects.filter(pk=session.pk).exists()
    assert not Artifact.objects.filter(session_id=session.pk).exists()
    assert _session_files(project.pk, sid) == set()


def _race(role: str, base_url: str, key: str, session_id: str, who: int) -> list[int]:
    if role == "up":
        return upload_each_round(base_url, key, session_id, who)
    return delete_each_round(base_url, key, session_id, whole_session=role == "session")


def test_a_body_that_ends_before_its_length_keeps_nothing(server):
    """The client sends 3 bytes of the 10 it announced and stops sending: the server reads the
    end of the body, refuses the upload, and removes what it had written."""
    project = make_project()
    _, key = make_api_key(project)
    session = make_session(project)
    url = urllib.parse.urlsplit(server)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(
            (
                f"PUT /api/v1/sessions/{session.pk}/artifacts/cut HTTP/1.1\r\n"
                f"Host: {url.hostname}\r\nAuthorization: Bearer {key}\r\n"
                "Content-Type: text/plain\r\nContent-Length: 10\r\nConnection: close\r\n\r\nabc"
            ).encode()
        )
        sock.shutdown(socket.SHUT_WR)
        response = http.client.HTTPResponse(sock)
        response.begin()
        status = response.status
    assert status in (400, 422), status
    assert not Artifact.objects.exists()
    assert _session_files(project.pk, session.pk) == set()


@pytest.mark.parametrize("megabytes", [1, 16])
def test_an_upload_refused_before_its_body_is_read_still_gets_its_answer(server, megabytes):
    """A PUT to a session that is gone is refused before a byte of its body is read; the
    server reads the rest of the body before answering, so the client, still sending, gets
    the 404 (not a connection reset), and the connection stays usable."""
    project = make_project()
    _, key = make_api_key(project)
    session = make_session(project)
    gone = make_session(project)
    gone_id = str(gone.pk)
    gone.delete()
    body = b"x" * (megabytes * 1024 * 1024)
    with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {key}"}) as client:
        for _ in range(3):
            refused = client.put(
                f"/api/v1/sessions/{gone_id}/artifacts/big", content=body, timeout=30
            )
            assert refused.status_code == 404, refused.text
        kept = client.put(f"/api/v1/sessions/{session.pk}/artifacts/small", content=b"ok")
        assert kept.status_code == 201, kept.text
