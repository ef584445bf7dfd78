"""Blobs through the sync and async Clients against a live server: only what the server lacks
is sent, values of any size go in pieces and come back whole, forks read their parents'."""

import asyncio
import dataclasses
import hashlib
import os

import pytest
from switchboard_client import AsyncClient, Client, Conflict, NotFound, ResponseError
from switchboard_client._core import blobs_lookup, read_blobs

from sessions_app.models import Blob


def test_it_sends_only_what_the_session_lacks(sb):
    session = sb.open_session("blob-bot")
    first = [b"system prompt", b"user: hi"]

    names = sb.store_blobs(session.id, first)

    assert names == [hashlib.sha256(c).hexdigest() for c in first]
    assert sb.missing_blobs(session.id, names) == []
    grown = [*first, b"assistant: hello"]
    assert sb.missing_blobs(session.id, [hashlib.sha256(c).hexdigest() for c in grown]) == [
        hashlib.sha256(b"assistant: hello").hexdigest()
    ]
    sb.store_blobs(session.id, grown)
    assert Blob.objects.filter(session_id=session.id).count() == 3
    assert sb.load_blobs(session.id, list(reversed(names))) == list(reversed(first))
    assert sb.read_blob(session.id, names[1]) == b"user: hi"


def test_a_value_larger_than_a_request_goes_in_pieces_and_a_grown_one_sends_its_tail(sb):
    session = sb.open_session("blob-bot")
    value = os.urandom(3 * 1024 * 1024 + 17)  # over the 1 MiB body limit, not a piece multiple

    names = sb.store_value(session.id, value)

    assert len(names) == 13  # 256 KiB pieces
    assert sb.load_value(session.id, names) == value  # several lookups: 4 MiB per answer
    before = Blob.objects.filter(session_id=session.id).count()
    grown = sb.store_value(session.id, value + b"one more message")
    assert grown[:12] == names[:12]  # the unchanged pieces are the same blobs
    assert Blob.objects.filter(session_id=session.id).count() == before + 1
    assert sb.load_value(session.id, grown) == value + b"one more message"


def test_a_missing_blob_raises_not_found_naming_it(sb):
    session = sb.open_session("blob-bot")
    absent = hashlib.sha256(b"never stored").hexdigest()
    with pytest.raises(NotFound) as raised:
        sb.load_blobs(session.id, [absent])
    assert raised.value.detail == {"missing": [absent]}
    with pytest.raises(NotFound):
        sb.read_blob(session.id, absent)


def test_a_fork_reads_its_parents_blobs_through_the_async_client(server_url, api_key, sb):
    parent = sb.open_session("blob-bot")
    sb.append(parent.id, [{"kind": "note", "content": {}}])
    (name,) = sb.store_blobs(parent.id, [b"inherited"])
    fork = sb.fork(parent.id, 1)

    async def scenario() -> list[bytes]:
        async with AsyncClient(server_url, api_key) as client:
            assert await client.missing_blobs(fork.id, [name]) == []
            return await client.load_blobs(fork.id, [name])

    assert asyncio.run(scenario()) == [b"inherited"]


def counted(client, sent: list) -> None:
    """Record each request `client` sends: (operation path, body bytes)."""
    send = client._send

    def counting(request, **options):
        sent.append((request.operation.path, len(request.content or b"")))
        return send(request, **options)

    client._send = counting


def test_a_list_stored_again_and_again_sends_only_its_new_items(sb, server_url, api_key):
    session = sb.open_session("blob-bot")
    messages = [f"message {i}: ".encode() + b"x" * 300 for i in range(200)]
    sb.store_blobs(session.id, messages[:100])
    sent: list = []
    counted(sb, sent)

    sb.store_blobs(session.id, messages[:101])  # one new, small: sent without asking
    assert [path for path, _ in sent] == ["/sessions/{session_id}/blobs"]
    assert sent[0][1] < 1000  # the new message alone, not the hundred before it
    sent.clear()
    sb.store_blobs(session.id, messages[:101])
    assert sent == []  # nothing new: no request at all

    # A new client (a restarted process) asks once, then sends only what is new.
    sent.clear()
    large = [m * 200 for m in messages[101:103]]  # over ASK_FIRST_BYTES: worth asking first
    with Client(server_url, api_key) as fresh:
        counted(fresh, sent)
        fresh.store_blobs(session.id, messages[:101] + large)
    assert [path for path, _ in sent] == [
        "/sessions/{session_id}/blobs/lookup",
        "/sessions/{session_id}/blobs",
    ]
    assert sent[1][1] < 2 * sum(map(len, large))  # the two new ones, base64
    assert Blob.objects.filter(session_id=session.id).count() == 103


def test_a_fresh_client_loads_thousands_of_small_blobs_in_one_request(sb, server_url, api_key):
    session = sb.open_session("blob-bot")
    messages = [f"message {i}: ".encode() + b"x" * 300 for i in range(2500)]
    names = sb.store_blobs(session.id, messages)
    sent: list = []

    with Client(server_url, api_key) as fresh:  # a process that remembers nothing
        counted(fresh, sent)
        loaded = fresh.load_blobs(session.id, names)

    assert loaded == messages
    assert [path for path, _ in sent] == ["/sessions/{session_id}/blobs/lookup"]


def test_blobs_come_back_as_bytes_not_base64_in_json(sb, server_url, api_key):
    """load_blobs asks for the lookup's bytes answer (Accept: application/vnd.switchboard.blobs):
    a 5,000-message thread's blobs are 3.2 MB of JSON otherwise, parsed and base64-decoded."""
    session = sb.open_session("blob-bot")
    messages = [f"message {i}: ".encode() + b"x" * 300 for i in range(50)] + [b""]
    names = sb.store_blobs(session.id, messages)
    answers: list = []

    with Client(server_url, api_key) as fresh:
        send = fresh._send

        def recording(request, **options):
            response = send(request, **options)
            answers.append((response.headers["Content-Type"], len(response.content)))
            return response

        fresh._send = recording
        loaded = fresh.load_blobs(session.id, names)

    assert loaded == messages
    assert answers == [("application/vnd.switchboard.blobs", sum(4 + len(m) for m in messages))]


def test_a_json_lookup_answer_is_read_as_well(sb):
    """A server older than the bytes answer sends JSON to the same request: read_blobs reads
    it (here the real server, asked without the Accept header), missing names and all."""
    session = sb.open_session("blob-bot")
    held = [b"one", b"two"]
    names = sb.store_blobs(session.id, held)
    request = dataclasses.replace(blobs_lookup(session.id, names), accept=None)

    response = sb._send(request)

    assert response.headers["Content-Type"] == "application/json"
    assert read_blobs(request, response, names) == dict(zip(names, held, strict=True))
    absent = hashlib.sha256(b"absent").hexdigest()
    request = dataclasses.replace(blobs_lookup(session.id, [absent, *names]), accept=None)
    with pytest.raises(NotFound) as raised:
        read_blobs(request, sb._send(request), [absent, *names])
    assert raised.value.detail == {"missing": [absent]}


def test_a_bytes_answer_that_does_not_hold_what_was_asked_is_refused(sb):
    """A truncated answer (a proxy cutting it, a server bug) is an error, not short data."""
    session = sb.open_session("blob-bot")
    names = sb.store_blobs(session.id, [b"one", b"two"])
    request = blobs_lookup(session.id, names)
    response = sb._send(request)
    response._content = response.content[:-1]

    with pytest.raises(ResponseError, match="does not hold 2 names"):
        read_blobs(request, response, names)


def test_an_append_carries_its_blobs_in_one_request(sb):
    session = sb.open_session("blob-bot")
    values = [b"a channel value", b"another"]
    names = [hashlib.sha256(v).hexdigest() for v in values]
    sent: list = []
    counted(sb, sent)

    result = sb.append(session.id, [{"kind": "note", "content": {"values": names}}], blobs=values)

    assert [path for path, _ in sent] == ["/sessions/{session_id}/events"]
    assert result.head_seq == 1
    assert sb.load_blobs(session.id, names) == values
    # Stored by this client: named again, they are not sent again (nor asked about).
    sent.clear()
    sb.append(session.id, [{"kind": "note", "content": {}}], blobs=[values[0]])
    assert len(sent) == 1 and sent[0][1] < 200


def test_a_refused_append_stores_its_blobs_neither_and_they_are_sent_again(sb):
    session = sb.open_session("blob-bot")
    sb.close_session(session.id)
    with pytest.raises(Conflict):
        sb.append(session.id, [{"kind": "note", "content": {}}], blobs=[b"value"])
    assert not Blob.objects.filter(session_id=session.id).exists()

    other = sb.open_session("blob-bot")
    sb.append(other.id, [{"kind": "note", "content": {}}], blobs=[b"value"])
    assert Blob.objects.filter(session_id=other.id).count() == 1


def test_blobs_too_big_for_one_append_are_stored_first(sb):
    session = sb.open_session("blob-bot")
    values = [os.urandom(256 * 1024) for _ in range(4)]  # 1 MiB: over one request's body
    sent: list = []
    counted(sb, sent)

    sb.append(session.id, [{"kind": "note", "content": {}}], blobs=values)

    # Over ASK_FIRST_BYTES: asked first, as store_blobs does; then stored in batches, appended.
    paths = [path for path, _ in sent]
    assert paths[0] == "/sessions/{session_id}/blobs/lookup"
    assert paths[-1] == "/sessions/{session_id}/events"
    assert set(paths[1:-1]) == {"/sessions/{session_id}/blobs"}
    assert all(size < 1024 * 1024 for _, size in sent)
    assert sb.load_blobs(session.id, [hashlib.sha256(v).hexdigest() for v in values]) == values


def test_the_async_client_appends_with_blobs(server_url, api_key):
    async def scenario() -> list[bytes]:
        async with AsyncClient(server_url, api_key) as client:
            session = await client.open_session("blob-bot")
            await client.append(session.id, [{"kind": "note", "content": {}}], blobs=[b"async"])
            return await client.load_blobs(session.id, [hashlib.sha256(b"async").hexdigest()])

    assert asyncio.run(scenario()) == [b"async"]


def test_blobs_a_client_read_are_not_sent_again(sb, server_url, api_key):
    session = sb.open_session("blob-bot")
    values = [os.urandom(40 * 1024) for _ in range(2)]  # over ASK_FIRST_BYTES together
    names = sb.store_blobs(session.id, values)
    sent: list = []
    with Client(server_url, api_key) as fresh:  # a restarted process, reading the thread
        assert fresh.load_blobs(session.id, names) == values
        counted(fresh, sent)
        fresh.append(session.id, [{"kind": "note", "content": {"values": names}}], blobs=values)
    assert [path for path, _ in sent] == ["/sessions/{session_id}/events"]  # nor asked
    assert sent[0][1] < 1000
