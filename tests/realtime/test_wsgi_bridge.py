"""config/wsgi_bridge.py: a WSGI application served from the event loop with one thread hop each
way for a small body and a plain response, and a2wsgi's per-chunk hops for the rest.

Driven as an ASGI server drives it (scope, receive, send on a running loop) with small WSGI
applications that record the thread they ran on."""

import asyncio
import threading
from typing import Any

from config.wsgi_bridge import BufferedWsgi


def scope(method: str = "POST", headers: list[tuple[bytes, bytes]] | None = None) -> dict:
    return {
        "type": "http",
        "method": method,
        "path": "/echo",
        "root_path": "",
        "query_string": b"a=1",
        "http_version": "1.1",
        "headers": headers or [],
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
    }


def serve(app: Any, request_scope: dict, chunks: list[bytes], *, max_body: int = 1024) -> dict:
    """Run one request through BufferedWsgi; what the server was sent and what the app saw."""
    sent: list[dict] = []
    seen: dict[str, Any] = {}

    async def main() -> None:
        seen["loop_thread"] = threading.get_ident()
        messages = [
            {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
            for i, c in enumerate(chunks or [b""])
        ]

        async def receive() -> dict:
            return messages.pop(0)

        async def send(message: dict) -> None:
            sent.append(message)

        bridge = BufferedWsgi(app(seen), workers=2, max_buffered_body=max_body)
        await bridge(request_scope, receive, send)
        bridge.executor.shutdown()

    asyncio.run(main())
    return {"sent": sent, **seen}


def echo(seen: dict) -> Any:
    def app(environ: dict, start_response: Any) -> list[bytes]:
        seen["app_thread"] = threading.get_ident()
        seen["query"] = environ["QUERY_STRING"]
        body = environ["wsgi.input"].read()
        start_response("201 Created", [("Content-Type", "text/plain"), ("X-Len", str(len(body)))])
        return [b"got:", body]

    return app


def streamer(seen: dict) -> Any:
    def app(environ: dict, start_response: Any) -> Any:
        seen["app_thread"] = threading.get_ident()
        start_response("200 OK", [("Content-Type", "text/plain")])

        def chunks() -> Any:
            yield b"one,"
            yield b"two"

        return chunks()

    return app


def test_a_small_body_and_a_plain_response_take_one_start_and_one_body_message():
    body = b'{"events": []}'
    out = serve(
        echo, scope(headers=[(b"content-length", str(len(body)).encode())]), [body[:5], body[5:]]
    )
    assert out["app_thread"] != out["loop_thread"]  # the application ran on a worker thread
    assert out["query"] == "a=1"
    start, payload = out["sent"]
    assert start["type"] == "http.response.start"
    assert start["status"] == 201
    assert (b"x-len", str(len(body)).encode()) in start["headers"]
    assert payload == {"type": "http.response.body", "body": b"got:" + body, "more_body": False}


def test_a_body_over_the_buffer_limit_is_read_through_the_loop_from_the_thread():
    body = b"x" * 3000
    out = serve(
        echo,
        scope(headers=[(b"content-length", b"3000")]),
        [body[:1000], body[1000:2000], body[2000:]],
        max_body=1024,
    )
    start, payload = out["sent"]
    assert (b"x-len", b"3000") in start["headers"]
    assert payload["body"] == b"got:" + body


def test_a_request_without_a_body_reads_empty():
    out = serve(echo, scope(method="GET"), [])
    assert out["sent"][1]["body"] == b"got:"


def test_a_streaming_response_is_sent_chunk_by_chunk_then_closed():
    out = serve(streamer, scope(method="GET"), [])
    assert [m["type"] for m in out["sent"]] == [
        "http.response.start",
        "http.response.body",
        "http.response.body",
        "http.response.body",
    ]
    assert [m.get("body") for m in out["sent"][1:]] == [b"one,", b"two", b""]
    assert out["sent"][-1]["more_body"] is False


def test_a_plain_response_reaches_the_client_while_the_thread_closes_it():
    """Django's request_finished (returning the database connection, ...) runs in close(): the
    answer is written meanwhile, not after it."""
    written = threading.Event()

    class Response(list):
        def close(self) -> None:
            self.written_before_close = written.wait(timeout=5)

    response = Response([b"done"])

    def app(seen: dict) -> Any:
        def call(environ: dict, start_response: Any) -> list[bytes]:
            start_response("200 OK", [("Content-Type", "text/plain")])
            return response

        return call

    sent: list[dict] = []

    async def main() -> None:
        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict) -> None:
            sent.append(message)
            if message["type"] == "http.response.body" and not message["more_body"]:
                written.set()

        bridge = BufferedWsgi(app({}), workers=1, max_buffered_body=1024)
        await bridge(scope(method="GET"), receive, send)
        bridge.executor.shutdown()

    asyncio.run(main())
    assert response.written_before_close is True
    assert sent[-1]["body"] == b"done"
