"""Retries, against a tiny scripted HTTP server on a real socket (no mocking of httpx): 503 and
429 with Retry-After then success, connection failures, a connection broken after the request
went out (repeated only when the call is safe to repeat), other statuses never retried, keep-alive.
"""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from switchboard_client import (
    BadRequest,
    Client,
    Conflict,
    InvalidInput,
    NetworkError,
    NotFound,
    RateLimited,
    RetryPolicy,
    Unavailable,
)
from switchboard_client._core import parse_retry_after

PROJECT = {"id": 1, "name": "acme", "key_scope": "agent"}
APPENDED = {
    "head_seq": 1,
    "status": "open",
    "events": [
        {
            "seq": 1,
            "kind": "note",
            "tier": "transient",
            "created_at": "2026-01-01T00:00:00+00:00",
            "replayed": False,
        }
    ],
}
DROP = "drop"  # close the connection without answering


def error(status, code, **headers):
    return (
        status,
        headers,
        {"error": {"code": code, "message": f"{code}!", "detail": {"why": code}}},
    )


class Scripted:
    """Answers each request with the next of `answers` ((status, headers, body) or DROP) and
    records (method, path, body, client port, monotonic time) of each."""

    def __init__(self, answers, port=0):
        self.answers = list(answers)
        self.requests = []
        script = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_one(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                script.requests.append(
                    (self.command, self.path, body, self.client_address[1], time.monotonic())
                )
                answer = script.answers.pop(0)
                if answer == DROP:
                    self.close_connection = True
                    return
                status, headers, payload = answer
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name.replace("_", "-"), value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = handle_one

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def client(url, **policy):
    retry = RetryPolicy(**{"max_retries": 3, "backoff": 0.01, "max_backoff": 0.05, **policy})
    return Client(url, "test-key", retry=retry, timeout=5)


def gaps(requests):
    return [b[4] - a[4] for a, b in zip(requests, requests[1:], strict=False)]


def test_a_503_with_retry_after_is_retried_after_that_long():
    answers = [error(503, "unavailable", Retry_After="1"), (200, {}, PROJECT)]
    with Scripted(answers) as server, client(server.url) as sb:
        assert sb.project().name == "acme"
    assert len(server.requests) == 2 and 1.0 <= gaps(server.requests)[0] < 2.0


def test_a_429_is_retried_and_the_append_keeps_its_idempotency_keys():
    answers = [
        error(429, "rate_limited", Retry_After="1"),
        error(503, "unavailable"),
        (201, {}, APPENDED),
    ]
    with Scripted(answers) as server, client(server.url) as sb:
        result = sb.append("s-1", [{"kind": "note", "content": {"n": 1}}])
    assert result.events[0].seq == 1
    bodies = [json.loads(r[2]) for r in server.requests]
    assert len(bodies) == 3 and bodies[0] == bodies[1] == bodies[2]
    key = bodies[0]["events"][0]["idempotency_key"]
    assert len(key) == 32 and int(key, 16) >= 0
    assert gaps(server.requests)[0] >= 1.0


def test_retries_are_bounded_and_raise_the_last_answer_typed():
    with (
        Scripted([error(503, "unavailable")] * 4) as server,
        client(server.url) as sb,
        pytest.raises(Unavailable) as failed,
    ):
        sb.project()
    assert len(server.requests) == 4  # the first and 3 retries
    assert failed.value.code == "unavailable" and failed.value.detail == {"why": "unavailable"}
    assert all(gap < 0.5 for gap in gaps(server.requests))


@pytest.mark.parametrize(
    ("status", "code", "raised"),
    [
        (404, "not_found", NotFound),
        (409, "head_seq_mismatch", Conflict),
        (422, "invalid_input", InvalidInput),
        (400, "bad_request", BadRequest),
    ],
)
def test_other_4xx_are_never_retried(status, code, raised):
    with (
        Scripted([error(status, code), (200, {}, PROJECT)]) as server,
        client(server.url) as sb,
        pytest.raises(raised) as failed,
    ):
        sb.project()
    assert len(server.requests) == 1
    assert (failed.value.status, failed.value.code, failed.value.message) == (
        status,
        code,
        f"{code}!",
    )


def test_a_retry_after_beyond_the_policy_is_raised_at_once():
    answers = [error(429, "rate_limited", Retry_After="120"), (200, {}, PROJECT)]
    with (
        Scripted(answers) as server,
        client(server.url, max_retry_after=30) as sb,
        pytest.raises(RateLimited) as failed,
    ):
        sb.project()
    assert len(server.requests) == 1 and failed.value.retry_after == 120


def test_a_refused_connection_is_retried_until_the_server_answers():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    got = {}

    def call():
        with client(
            f"http://127.0.0.1:{port}", max_retries=100, backoff=0.05, max_backoff=0.1
        ) as sb:
            got["project"] = sb.project()

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.5)  # nothing listens yet: the first attempts are refused
    with Scripted([(200, {}, PROJECT)], port=port) as server:
        caller.join(timeout=20)
    assert got["project"].name == "acme" and len(server.requests) == 1


def test_a_connection_refused_throughout_raises_network_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with client(f"http://127.0.0.1:{port}") as sb, pytest.raises(NetworkError) as failed:
        sb.project()
    assert failed.value.status is None and failed.value.code == "network_error"
    assert "ConnectError" in str(failed.value)


def test_a_broken_connection_is_retried_only_when_the_call_is_safe_to_repeat():
    session = {
        "id": "s-1",
        "external_id": None,
        "title": "",
        "agent": "a",
        "status": "paused",
        "metadata": {},
        "head_seq": 0,
        "usage": {"tokens": 0, "cost": "0"},
        "budget": {"max_tokens": None, "max_cost": None},
        "lineage": {"parent_id": None, "fork_seq": None, "ancestry": []},
        "created_at": "2026-01-01T00:00:00+00:00",
        "updated_at": "2026-01-01T00:00:00+00:00",
        "closed_at": None,
    }
    # A pause may have been made before the connection broke: not sent again.
    with (
        Scripted([DROP, (200, {}, session)]) as server,
        client(server.url) as sb,
        pytest.raises(NetworkError),
    ):
        sb.pause_session("s-1")
    assert len(server.requests) == 1
    # An append carries its keys, a GET changes nothing: both are sent again.
    answers = [DROP, (201, {}, APPENDED), DROP, (200, {}, PROJECT)]
    with Scripted(answers) as server, client(server.url) as sb:
        assert sb.append("s-1", [{"kind": "note", "content": {}}]).head_seq == 1
        assert sb.project().id == 1
    methods = [r[0] for r in server.requests]
    assert methods == ["POST", "POST", "GET", "GET"]
    assert server.requests[0][2] == server.requests[1][2]


def test_calls_share_one_kept_alive_connection():
    with Scripted([(200, {}, PROJECT)] * 3) as server, client(server.url) as sb:
        for _ in range(3):
            sb.project()
    assert len({r[3] for r in server.requests}) == 1


def test_backoff_is_full_jitter_under_its_cap():
    policy = RetryPolicy(backoff=0.5, max_backoff=8.0)
    for attempt, cap in [(0, 0.5), (2, 2.0), (6, 8.0)]:
        waits = [policy.jitter(attempt) for _ in range(400)]
        assert all(0 <= w <= cap for w in waits)
        assert min(waits) < cap * 0.1 and max(waits) > cap * 0.9


def test_retry_after_reads_seconds_and_http_dates():
    assert parse_retry_after("7") == 7
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None
    later = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 27 <= parse_retry_after(later) <= 30
