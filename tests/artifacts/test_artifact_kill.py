"""A server killed (SIGKILL) while an upload streams leaves a file and no row (the row and event
commit only after the file is whole); `manage.py sweep_artifact_files` removes such files once
untouched for long enough, and nothing a stored version names."""

import os
import signal
import socket
import time
import urllib.parse
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.files.storage import storages
from django.core.management import call_command

from sessions_app.models import Artifact, Event
from sessions_app.services.artifacts import sweep_orphan_files
from tests.factories import make_api_key, make_artifact, make_project, make_session
from tests.servers import wsgi_server_process

pytestmark = pytest.mark.django_db(transaction=True)


def _files(project_id, session_id) -> set[str]:
    root = Path(storages["artifacts"].location) / "artifacts" / str(project_id) / str(session_id)
    return {f"artifacts/{project_id}/{session_id}/{p.name}" for p in root.glob("*")}


def test_a_kill_mid_upload_leaves_an_unnamed_file_that_the_sweep_removes():
    project = make_project()
    _, key = make_api_key(project)
    session = make_session(project)
    kept = make_artifact(session, "kept.txt", b"kept")
    head = Event.objects.filter(session_id=session.pk).count()  # the kept one's event

    with wsgi_server_process() as (base_url, process):
        url = urllib.parse.urlsplit(base_url)
        sock = socket.create_connection((url.hostname, url.port), timeout=30)
        sock.sendall(
            (
                f"PUT /api/v1/sessions/{session.pk}/artifacts/big HTTP/1.1\r\n"
                f"Host: {url.hostname}\r\nAuthorization: Bearer {key}\r\n"
                "Content-Type: application/octet-stream\r\nContent-Length: 10000000\r\n\r\n"
            ).encode()
            + b"x" * 1_000_000
        )
        deadline = time.monotonic() + 20
        while len(_files(project.pk, session.pk)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # until the server has begun writing the file
        for pid in _tree(process.pid):
            os.kill(pid, signal.SIGKILL)
        process.wait(timeout=10)
        sock.close()

    orphans = _files(project.pk, session.pk) - {kept.storage_key}
    assert len(orphans) == 1  # the half-written file: no row, no event
    assert list(Artifact.objects.values_list("name", flat=True)) == ["kept.txt"]
    assert Event.objects.filter(session_id=session.pk).count() == head

    assert sweep_orphan_files(older_than=timedelta(hours=1)) == []  # too recent to be sure
    out = StringIO()
    call_command("sweep_artifact_files", "--hours", "0", stdout=out)
    (orphan,) = orphans
    # Other tests' files whose rows rolled back go too: no row names them either.
    assert f"removed {orphan}\n" in out.getvalue()
    assert _files(project.pk, session.pk) == {kept.storage_key}
    storages["artifacts"].delete(kept.storage_key)


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants (granian's worker is a child of its main process)."""
    import psutil

    root = psutil.Process(pid)
    return [p.pid for p in root.children(recursive=True)] + [pid]
