"""Served through config.wsgi_bridge (the run command's and the production ASGI entry) or
config.wsgi (a WSGI server's entry, granian in the production split), the outbox rows a request
commits are relayed once its response has been handed to the server, not before: the agent's
fork answers without waiting for the relay's claim, Redis send and commit.
The row is durable at commit either way; a relay that fails after the response leaves it to the
relay job. Elsewhere (the test client, Celery, the shell) the relay runs at commit."""

import asyncio
import json
import threading

import pytest
from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.utils import timezone

from config.wsgi_bridge import BufferedWsgi
from core import domain_events
from core.domain_events import RELAY_GRACE, relay_pending, relays_after_response
from core.models import OutboxMessage
from core.realtime import project_list_group, session_group
from tests.factories import make_api_key, make_session

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.requires_redis("live relay")]

QUIET = 0.6


def fork_through_the_bridge(project, session, *, on_sent=None) -> dict:
    return post_through_the_bridge(
        project, f"/api/v1/sessions/{session.pk}/fork", {"at_seq": 0}, on_sent=on_sent
    )


def post_through_the_bridge(project, path: str, payload: dict, *, on_sent=None) -> dict:
    """POST through BufferedWsgi (Django's WSGI handler, relays and live notices held for the
    response) as an ASGI server drives it; the status and body the server was sent."""
    _key, raw = make_api_key(project)
    body = json.dumps(payload).encode()
    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "root_path": "",
        "query_string": b"",
        "http_version": "1.1",
        "headers": [
            (b"host", b"localhost"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"authorization", f"Bearer {raw}".encode()),
        ],
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
    }
    sent: list[dict] = []

    async def main() -> None:
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict:
            return messages.pop(0)

        async def send(message: dict) -> None:
            sent.append(message)
            last = message["type"] == "http.response.body" and not message.get("more_body")
            if last and on_sent is not None:
                on_sent()

        bridge = BufferedWsgi(
            get_wsgi_application(),
            workers=1,
            max_buffered_body=settings.SWITCHBOARD_MAX_BODY_BYTES,
            around=relays_after_response,
        )
        await bridge(scope, receive, send)
        bridge.executor.shutdown(wait=True)  # the thread's relay after the response included

    asyncio.run(main())
    return {
        "status": sent[0]["status"],
        "body": b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"),
    }


def opened_rows() -> list[OutboxMessage]:
    return list(OutboxMessage.objects.filter(type="session.opened").order_by("id"))


def test_the_fork_is_relayed_after_its_response_is_handed_over(project, listen, monkeypatch):
    session = make_session(project)
    heard = listen(project_list_group(project.pk, "sessions"))
    OutboxMessage.objects.all().delete()
    response_sent = threading.Event()
    seen: dict[str, bool] = {}
    real_relay_all = domain_events.relay_all

    def relay_all_once_the_response_is_out(message_ids: list[int]) -> int:
        # Held inside the request, this would wait here in vain (the response not yet out).
        seen["response_out_first"] = response_sent.wait(timeout=5)
        return real_relay_all(message_ids)

    monkeypatch.setattr(domain_events, "relay_all", relay_all_once_the_response_is_out)
    answer = fork_through_the_bridge(project, session, on_sent=response_sent.set)

    assert answer["status"] == 201
    fork_id = json.loads(answer["body"])["id"]
    assert seen == {"response_out_first": True}
    [row] = opened_rows()
    assert row.payload["session_id"] == fork_id and row.relayed_at is not None
    assert [m["session_id"] for m in heard.receive_all(QUIET)] == [fork_id]


def test_an_appends_live_notice_is_published_after_its_response_is_handed_over(
    project, listen, monkeypatch
):
    from core import realtime

    session = make_session(project)
    heard = listen(session_group(session.pk))
    response_sent = threading.Event()
    seen: list[bool] = []
    real_publish = realtime._publish_or_submit

    def publish_once_the_response_is_out(layer, groups, message):
        if message["type"] == "session.events":  # not the new API key's audit notice
            # Held inside the request, this would wait here in vain (the response not yet out).
            seen.append(response_sent.wait(timeout=5))
        return real_publish(layer, groups, message)

    monkeypatch.setattr(realtime, "_publish_or_submit", publish_once_the_response_is_out)
    answer = post_through_the_bridge(
        project,
        f"/api/v1/sessions/{session.pk}/events",
        {"events": [{"kind": "note", "content": {"text": "hi"}}]},
        on_sent=response_sent.set,
    )
    assert answer["status"] == 201, answer["body"]
    assert seen == [True]
    [notice] = heard.receive_all(QUIET)
    assert (notice["session_id"], notice["from_seq"], notice["to_seq"]) == (str(session.pk), 1, 1)


def test_outside_the_bridge_a_live_notice_goes_at_commit(project, api, listen):
    """The test client (and Celery, the shell): nothing held, the notice is out by the time
    the response is."""
    from core import realtime

    session = make_session(project)
    heard = listen(session_group(session.pk))
    assert getattr(realtime._after_response, "sends", None) is None
    response = api.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}]})
    assert response.status_code == 201
    assert heard.receive(timeout=QUIET)["to_seq"] == 1


def test_a_relay_that_fails_after_the_response_leaves_the_row_to_the_relay_job(
    project, listen, monkeypatch
):
    from core import realtime

    def layer_down(*_args, **_kwargs):
        raise OSError("down")

    session = make_session(project)
    OutboxMessage.objects.all().delete()
    monkeypatch.setattr(realtime, "_publish_or_submit", layer_down)
    answer = fork_through_the_bridge(project, session)
    assert answer["status"] == 201  # the client never hears of it
    [row] = opened_rows()
    assert row.relayed_at is None
    monkeypatch.undo()
    heard = listen(project_list_group(project.pk, "sessions"))
    assert relay_pending(now=timezone.now() + RELAY_GRACE) == 1
    assert [m["type"] for m in heard.receive_all(QUIET)] == ["session.opened"]


def test_outside_the_bridge_the_relay_runs_at_commit(project, api):
    """The test client (and Celery, the shell) relay at commit, as before."""
    session = make_session(project)
    OutboxMessage.objects.all().delete()
    assert api.post(f"/sessions/{session.pk}/fork", {"at_seq": 0}).status_code == 201
    [row] = opened_rows()
    assert row.relayed_at is not None


# --- Under a WSGI server (config.wsgi: granian or gunicorn in the production split) ---------


def wsgi_call(project, path: str, payload: dict):
    """Call config.wsgi's application as a WSGI server does (the environ Django's
    RequestFactory builds), up to the response's body read but not closed: the status, the
    body, and the response to close."""
    from django.test import RequestFactory

    from config.wsgi import application

    _key, raw = make_api_key(project)
    environ = (
        RequestFactory()
        .post(path, payload, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}")
        .environ
    )
    status: list[str] = []
    response = application(environ, lambda s, headers, exc_info=None: status.append(s))
    return status[0], b"".join(response), response


def test_under_a_wsgi_server_the_fork_is_relayed_when_its_response_is_closed(project, listen):
    session = make_session(project)
    heard = listen(project_list_group(project.pk, "sessions"))
    OutboxMessage.objects.all().delete()
    status, body, response = wsgi_call(
        project, f"/api/v1/sessions/{session.pk}/fork", {"at_seq": 0}
    )
    assert status.startswith("201"), body
    fork_id = json.loads(body)["id"]
    # The server has the whole answer; the relay waits for the close that follows its write.
    [row] = opened_rows()
    assert row.relayed_at is None
    assert heard.receive_all(QUIET) == []
    response.close()
    [row] = opened_rows()
    assert row.relayed_at is not None
    assert [m["session_id"] for m in heard.receive_all(QUIET)] == [fork_id]
    # Nothing is left held on the thread for the next request.
    assert getattr(domain_events._serving, "relays", None) is None


def test_under_a_wsgi_server_an_appends_notice_is_published_when_its_response_is_closed(
    project, listen
):
    from core import realtime

    session = make_session(project)
    heard = listen(session_group(session.pk))
    status, body, response = wsgi_call(
        project, f"/api/v1/sessions/{session.pk}/events", {"events": [{"kind": "note"}]}
    )
    assert status.startswith("201"), body
    assert heard.receive_all(QUIET) == []
    response.close()
    [notice] = heard.receive_all(QUIET)
    assert (notice["from_seq"], notice["to_seq"]) == (1, 1)
    assert getattr(realtime._after_response, "sends", None) is None


def test_granian_serving_config_wsgi_answers_a_fork_and_relays_it(project, listen):
    """The production split's WSGI side, a real granian process: it closes each response
    after writing it, so the relay held until then does go out."""
    import subprocess
    import sys
    import urllib.request

    from tests.servers import ROOT, child_env, free_port, wait_for_http

    session = make_session(project)
    _key, raw = make_api_key(project)
    heard = listen(project_list_group(project.pk, "sessions"))
    OutboxMessage.objects.all().delete()
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable, "-m", "granian", "--interface", "wsgi", "config.wsgi:application",
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--blocking-threads", "2", "--no-ws", "--log-level", "warning",
        ],
        cwd=ROOT,
        env=child_env(),
    )  # fmt: skip
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz", process=server)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/sessions/{session.pk}/fork",
            data=b'{"at_seq": 0}',
            headers={"Authorization": f"Bearer {raw}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 201
            fork_id = json.loads(answer.read())["id"]
        assert [m["session_id"] for m in heard.receive_all(2 * QUIET)] == [fork_id]
        [row] = opened_rows()
        assert row.relayed_at is not None
    finally:
        server.terminate()
        server.wait(timeout=10)
