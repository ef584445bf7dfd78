"""Artifacts through the sync and async Clients against a live server (ASGI): put, get (by
version and as of a seq), list, delete; a put is never sent twice."""

import asyncio
import hashlib
import io
import os
import tarfile

import pytest
from switchboard_client import AsyncClient, NotFound
from switchboard_client import operations as ops


def test_it_puts_gets_lists_and_deletes_versions(sb):
    session = sb.open_session("artifact-bot")
    data = os.urandom(200_000)

    first = sb.put_artifact(session.id, "report.bin", data)
    second = sb.put_artifact(session.id, "report.bin", b"v2", content_type="text/plain")

    assert (first.version, first.size, first.sha256) == (
        1,
        len(data),
        hashlib.sha256(data).hexdigest(),
    )
    assert second.version == 2 and second.content_type == "text/plain"
    assert sb.get_artifact(session.id, "report.bin") == b"v2"
    assert sb.get_artifact(session.id, "report.bin", version=1) == data
    assert sb.get_artifact(session.id, "report.bin", at_seq=first.seq) == data
    (listed,) = sb.list_artifacts(session.id)
    assert listed.name == "report.bin" and listed.latest.version == 2
    assert [v.size for v in listed.versions] == [len(data), 2]
    assert sb.list_artifacts(session.id, at_seq=first.seq - 1) == []
    logged = sb.events(session.id, kind=["artifact"]).events
    assert [(e.seq, e.content["version"]) for e in logged] == [(first.seq, 1), (second.seq, 2)]

    with tarfile.open(fileobj=io.BytesIO(sb.export_artifacts(session.id))) as archive:
        assert archive.getnames() == ["report.bin/v1", "report.bin/v2", "manifest.json"]

    assert sb.delete_artifact(session.id, "report.bin", version=1) == [1]
    with pytest.raises(NotFound):
        sb.get_artifact(session.id, "report.bin", version=1)
    assert sb.delete_artifact(session.id, "report.bin") == [2]
    assert sb.list_artifacts(session.id) == []


def test_a_fork_reads_its_parents_artifacts_through_the_async_client(server_url, api_key, sb):
    parent = sb.open_session("artifact-bot")
    saved = sb.put_artifact(parent.id, "plan.md", b"# plan", content_type="text/markdown")
    fork = sb.fork(parent.id, at_seq=saved.seq)
    sb.put_artifact(parent.id, "plan.md", b"# later")

    async def read() -> bytes:
        async with AsyncClient(server_url, api_key) as client:
            return await client.get_artifact(fork.id, "plan.md")

    assert asyncio.run(read()) == b"# plan"


def test_a_put_is_not_sent_again():
    assert not ops.ARTIFACT_PUT.idempotent  # a retry would save a second version
    assert ops.ARTIFACT_READ.idempotent and ops.ARTIFACT_DELETE.idempotent
