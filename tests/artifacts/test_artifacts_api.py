"""Artifacts through the agent API: PUT/GET/DELETE /api/v1/sessions/{id}/artifacts/{name} and the
listing. Bytes in the `artifacts` storage (a folder per test run: tests/settings.py), a row and
an `artifact` event per version; forks and reads at a seq see the lineage's versions up to
their point; limits and failures leave nothing behind."""

import hashlib
from pathlib import Path

import pytest
from django.core.files.storage import storages
from django.db import transaction

from core.actors import Actor
from retention_app.services.deletion import delete_session
from sessions_app.models import Artifact, Event
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import close_session
from tests.factories import make_session

TESTER = Actor.system("tests")


def put(api, session_id, name, data: bytes, content_type="application/octet-stream", **extra):
    return api.client.put(
        f"/api/v1/sessions/{session_id}/artifacts/{name}",
        data=data,
        content_type=content_type,
        headers=api.headers,
        **extra,
    )


def get(api, session_id, name, **params):
    return api.client.get(
        f"/api/v1/sessions/{session_id}/artifacts/{name}", params, headers=api.headers
    )


def body(response) -> bytes:
    return b"".join(response.streaming_content)


def stored_files() -> set[str]:
    root = Path(storages["artifacts"].location)
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def note(session):
    append_events(session, [EventDraft(kind="note", content={})], actor=TESTER)


@pytest.fixture(autouse=True)
def _clean_storage():
    before = stored_files()
    yield
    # Every test leaves the files of its committed rows only (the db fixture rolls rows back).
    for key in stored_files() - before:
        storages["artifacts"].delete(key)


def test_it_round_trips_the_bytes_with_their_hash_and_records_an_event(api, project):
    session = make_session(project)
    data = bytes(range(256)) * 1000
    saved = put(api, session.pk, "report.bin", data)
    assert saved.status_code == 201, saved.content
    answer = saved.json()
    assert answer["version"] == 1
    assert answer["size"] == len(data)
    assert answer["sha256"] == hashlib.sha256(data).hexdigest()

    fetched = get(api, session.pk, "report.bin")
    assert fetched.status_code == 200
    assert body(fetched) == data
    assert fetched["ETag"] == f'"{answer["sha256"]}"'
    assert fetched["Content-Disposition"] == 'attachment; filename="report.bin"'
    assert fetched["X-Content-Type-Options"] == "nosniff"
    event = Event.objects.get(session_id=session.pk, seq=answer["seq"])
    assert event.kind == "artifact" and event.tier == "durable"
    assert event.content == {
        "action": "save",
        "name": "report.bin",
        "version": 1,
        "size": len(data),
        "sha256": answer["sha256"],
        "content_type": "application/octet-stream",
    }
    artifact = Artifact.objects.get()
    assert storages["artifacts"].open(artifact.storage_key).read() == data


def test_html_is_never_served_as_html(api, project):
    session = make_session(project)
    put(api, session.pk, "page.html", b"<script>alert(1)</script>", content_type="text/html")
    fetched = get(api, session.pk, "page.html")
    assert fetched["Content-Type"] == "application/octet-stream"
    assert fetched["Content-Disposition"].startswith("attachment;")
    assert "sandbox" in fetched["Content-Security-Policy"]
    put(api, session.pk, "shot.png", b"\x89PNG...", content_type="image/png; charset=x")
    assert get(api, session.pk, "shot.png")["Content-Type"] == "image/png"


def test_range_requests_answer_the_part_asked_for(api, project):
    session = make_session(project)
    data = b"0123456789" * 10
    put(api, session.pk, "digits.txt", data, content_type="text/plain")

    def ranged(header):
        return api.client.get(
            f"/api/v1/sessions/{session.pk}/artifacts/digits.txt",
            headers={**api.headers, "Range": header},
        )

    part = ranged("bytes=10-19")
    assert part.status_code == 206
    assert body(part) == data[10:20]
    assert part["Content-Range"] == "bytes 10-19/100"
    assert part["Content-Length"] == "10"
    assert body(ranged("bytes=95-")) == data[95:]
    assert body(ranged("bytes=-3")) == data[-3:]
    assert body(ranged("bytes=90-500")) == data[90:]
    past = ranged("bytes=100-")
    assert past.status_code == 416
    assert past.json()["error"]["code"] == "range_not_satisfiable"
    assert past["Content-Range"] == "bytes */100"
    whole = ranged("bytes=0-1,5-6")  # several ranges: the whole file
    assert whole.status_code == 200 and body(whole) == data


def test_each_save_is_a_new_version_and_the_listing_names_them(api, project):
    session = make_session(project)
    for text in (b"one", b"two!", b"three"):
        assert put(api, session.pk, "notes.md", text).status_code == 201
    put(api, session.pk, "other", b"x")

    assert body(get(api, session.pk, "notes.md")) == b"three"
    assert body(get(api, session.pk, "notes.md", version=1)) == b"one"
    assert get(api, session.pk, "notes.md", version=4).status_code == 404
    listed = api.get(f"/sessions/{session.pk}/artifacts").json()["artifacts"]
    assert [a["name"] for a in listed] == ["notes.md", "other"]
    assert [(v["version"], v["size"]) for v in listed[0]["versions"]] == [(1, 3), (2, 4), (3, 5)]
    assert listed[0]["latest"]["version"] == 3
    seqs = list(Event.objects.filter(session_id=session.pk).values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))  # gap-free, one event per save


@pytest.mark.django_db(transaction=True)  # the files go once the deletion commits
def test_delete_a_version_or_all_and_numbers_are_not_given_again(api, project):
    session = make_session(project)
    for text in (b"a", b"b", b"c"):
        put(api, session.pk, "f", text)
    files = stored_files()
    gone = api.delete(f"/sessions/{session.pk}/artifacts/f?version=2")
    assert gone.status_code == 200
    assert gone.json() == {"name": "f", "versions": [2]}
    assert get(api, session.pk, "f", version=2).status_code == 404
    assert body(get(api, session.pk, "f")) == b"c"
    assert len(stored_files()) == len(files) - 1  # its file went with it

    assert api.delete(f"/sessions/{session.pk}/artifacts/f").json()["versions"] == [1, 3]
    assert get(api, session.pk, "f").status_code == 404
    assert api.get(f"/sessions/{session.pk}/artifacts").json() == {"artifacts": []}
    assert api.delete(f"/sessions/{session.pk}/artifacts/f").status_code == 404
    assert put(api, session.pk, "f", b"d").json()["version"] == 4
    deletions = Event.objects.filter(session_id=session.pk, content__action="delete")
    assert [e.content["versions"] for e in deletions.order_by("seq")] == [[2], [1, 3]]
    assert stored_files() - files == {Artifact.objects.get(version=4).storage_key}


def test_a_fork_sees_its_parents_artifacts_up_to_its_fork_point_only(api, project):
    parent = make_session(project)
    put(api, parent.pk, "plan", b"v1")
    note(parent)
    put(api, parent.pk, "plan", b"v2")
    head = api.get(f"/sessions/{parent.pk}").json()["head_seq"]
    fork = api.post(f"/sessions/{parent.pk}/fork", {"at_seq": head}).json()["id"]
    put(api, parent.pk, "plan", b"v3 after the fork")
    put(api, parent.pk, "late", b"after the fork")
    files = stored_files()

    assert body(get(api, fork, "plan")) == b"v2"
    assert get(api, fork, "late").status_code == 404
    assert get(api, fork, "plan", version=3).status_code == 404
    listed = api.get(f"/sessions/{fork}/artifacts").json()["artifacts"]
    assert [(a["name"], [v["version"] for v in a["versions"]]) for a in listed] == [
        ("plan", [1, 2])
    ]
    # Its own save continues the numbering it sees; nothing of the parent's was copied.
    assert put(api, fork, "plan", b"fork's own").json()["version"] == 3
    assert len(stored_files()) == len(files) + 1
    assert body(get(api, fork, "plan")) == b"fork's own"
    assert body(get(api, parent.pk, "plan")) == b"v3 after the fork"
    # The parent cannot take away what the fork shares; it can delete what came after.
    shared = api.delete(f"/sessions/{parent.pk}/artifacts/plan?version=1")
    assert shared.status_code == 409
    assert shared.json()["error"]["code"] == "artifact_shared_with_fork"
    assert api.delete(f"/sessions/{parent.pk}/artifacts/plan?version=3").status_code == 200
    assert api.delete(f"/sessions/{fork}/artifacts/plan?version=1").status_code == 404


def test_reads_at_a_seq_see_what_existed_then(api, project):
    session = make_session(project)
    first = put(api, session.pk, "a", b"1").json()["seq"]
    second = put(api, session.pk, "a", b"22").json()["seq"]
    put(api, session.pk, "b", b"x")

    def names_at(seq):
        listed = api.get(f"/sessions/{session.pk}/artifacts?at_seq={seq}").json()["artifacts"]
        return {a["name"]: a["latest"]["version"] for a in listed}

    assert names_at(first - 1) == {}
    assert names_at(first) == {"a": 1}
    assert names_at(second) == {"a": 2}
    assert body(get(api, session.pk, "a", at_seq=first)) == b"1"
    assert get(api, session.pk, "b", at_seq=second).status_code == 404


@pytest.mark.parametrize("limit", ["file", "quota"])
def test_limits_refuse_the_upload_and_change_nothing(api, project, limit, settings):
    session = make_session(project)
    put(api, session.pk, "kept", b"12345")
    head = api.get(f"/sessions/{session.pk}").json()["head_seq"]
    files = stored_files()
    if limit == "file":
        settings.SWITCHBOARD_ARTIFACT_MAX_BYTES = 10
        status, code = 413, "artifact_too_large"
    else:
        settings.SWITCHBOARD_ARTIFACT_QUOTA_BYTES = 12
        status, code = 507, "artifact_quota_exceeded"
    refused = put(api, session.pk, "big", b"x" * 11)
    assert refused.status_code == status
    assert refused.json()["error"]["code"] == code
    assert api.get(f"/sessions/{session.pk}").json()["head_seq"] == head
    assert Artifact.objects.count() == 1
    assert stored_files() == files


def test_a_save_that_fails_after_streaming_leaves_no_file(api, project):
    """The session is closed while the bytes stream: the row and event are refused, and the
    file already written is removed."""
    session = make_session(project)
    files = stored_files()
    from sessions_app.services import artifacts

    real = artifacts._writable_locked

    def closed_meanwhile(s):
        close_session(s, actor=TESTER, reason="meanwhile")
        return real(s)

    artifacts._writable_locked = closed_meanwhile
    try:
        refused = put(api, session.pk, "late", b"bytes")
    finally:
        artifacts._writable_locked = real
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "session_not_writable"
    assert stored_files() == files
    assert not Artifact.objects.exists()


def test_bad_names_and_types_are_refused(api, project):
    session = make_session(project)
    for name in (".hidden", "-x", "a%20b", "x" * 201):
        assert put(api, session.pk, name, b"x").status_code == 422, name
    assert put(api, session.pk, "ok", b"x", content_type="not a type").status_code == 422
    assert not Artifact.objects.exists()


def test_another_projects_key_finds_nothing(other_api, api, project):
    session = make_session(project)
    put(api, session.pk, "secret", b"secret bytes")
    assert get(other_api, session.pk, "secret").status_code == 404
    assert other_api.get(f"/sessions/{session.pk}/artifacts").status_code == 404
    assert put(other_api, session.pk, "planted", b"x").status_code == 404
    assert other_api.delete(f"/sessions/{session.pk}/artifacts/secret").status_code == 404
    assert Artifact.objects.count() == 1
    assert get(api, session.pk, "secret").status_code == 200


def test_no_key_is_401(api, project):
    session = make_session(project)
    response = api.client.put(
        f"/api/v1/sessions/{session.pk}/artifacts/x", data=b"x", content_type="text/plain"
    )
    assert response.status_code == 401


def test_a_closed_session_takes_no_artifacts_but_serves_them(api, project):
    session = make_session(project)
    put(api, session.pk, "final", b"done")
    close_session(session, actor=TESTER, reason="finished")
    assert put(api, session.pk, "more", b"x").status_code == 409
    assert api.delete(f"/sessions/{session.pk}/artifacts/final").status_code == 409
    assert body(get(api, session.pk, "final")) == b"done"


@pytest.mark.django_db(transaction=True)
def test_deleting_the_session_deletes_its_artifacts_rows_and_files(api, project):
    session = make_session(project)
    put(api, session.pk, "a", b"1")
    put(api, session.pk, "a", b"2")
    other = make_session(project)
    put(api, other.pk, "kept", b"3")
    keys = set(Artifact.objects.filter(session_id=session.pk).values_list("storage_key", flat=True))
    assert keys <= stored_files()

    with transaction.atomic():
        delete_session(project.pk, session.pk, actor=TESTER)
    assert not Artifact.objects.filter(session_id=session.pk).exists()
    assert not keys & stored_files()
    assert Artifact.objects.get(session_id=other.pk).storage_key in stored_files()


def test_compaction_keeps_the_artifacts_and_their_events(api, project):
    """`artifact` events are durable: compaction (which removes transient events) keeps them,
    and every version stays readable, at head and at its seq."""
    from retention_app.services.compaction import compact_session

    session = make_session(project)
    note(session)
    saved = put(api, session.pk, "kept.txt", b"kept", content_type="text/plain").json()
    note(session)
    close_session(session, actor=TESTER, reason="done")
    done = compact_session(session, actor=TESTER)
    assert done.events_removed == 2  # the notes
    kinds = list(Event.objects.filter(session_id=session.pk).values_list("kind", flat=True))
    assert "artifact" in kinds and "note" not in kinds
    assert body(get(api, session.pk, "kept.txt")) == b"kept"
    assert body(get(api, session.pk, "kept.txt", at_seq=saved["seq"])) == b"kept"


def test_the_export_streams_every_stored_version_with_a_manifest(api, other_api, project):
    import io
    import json
    import tarfile

    from core.models import AuditEntry

    parent = make_session(project)
    put(api, parent.pk, "plan.md", b"# v1", content_type="text/markdown")
    put(api, parent.pk, "data.bin", bytes(range(256)) * 10)
    head = api.get(f"/sessions/{parent.pk}").json()["head_seq"]
    fork = api.post(f"/sessions/{parent.pk}/fork", {"at_seq": head}).json()["id"]
    put(api, parent.pk, "plan.md", b"# after the fork")
    put(api, fork, "plan.md", b"# the fork's own")

    response = api.client.get(f"/api/v1/sessions/{fork}/export/artifacts", headers=api.headers)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(body(response)), mode="r:") as archive:
        files = {m.name: archive.extractfile(m).read() for m in archive.getmembers()}
    manifest = json.loads(files.pop("manifest.json"))
    assert files == {
        "data.bin/v1": bytes(range(256)) * 10,
        "plan.md/v1": b"# v1",
        "plan.md/v2": b"# the fork's own",
    }
    assert [(a["path"], a["sha256"]) for a in manifest["artifacts"]] == [
        (path, hashlib.sha256(data).hexdigest()) for path, data in sorted(files.items())
    ]
    assert manifest["session_id"] == fork
    exported = AuditEntry.objects.get(action="session.export", target_id=fork)
    assert exported.detail["artifacts"] == 3
    assert other_api.get(f"/sessions/{fork}/export/artifacts").status_code == 404
