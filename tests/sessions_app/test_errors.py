"""Every documented error of the agent API answers {"error": {code, message, detail}}, never a
stack trace, and a refused request changes nothing."""

import json
import socket
import time
import uuid

import httpx
import pytest

from config.api import api as ninja_api
from core.actors import Actor
from core.models import AuditEntry
from core.services.projects import revoke_api_key
from sessions_app.models import Event, Session, Snapshot
from tests.conftest import ApiClient
from tests.factories import make_api_key, make_session
from tests.servers import asgi_server


def _assert_error(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "detail"}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code
    assert b"Traceback" not in response.content
    return body["error"]


def _world() -> tuple:
    return (
        list(Session.objects.order_by("pk").values_list("pk", "status", "head_seq")),
        Event.objects.count(),
        Snapshot.objects.count(),
        AuditEntry.objects.count(),
    )


@pytest.fixture
def session(project):
    return make_session(project)


def _raw_post(api: ApiClient, path: str, body: bytes, **headers):
    return api.client.generic(
        "POST",
        f"/api/v1{path}",
        body,
        content_type="application/json",
        headers={**api.headers, **headers},
    )


# --- 400 ------------------------------------------------------------------------------------


def test_it_answers_400_to_a_body_that_is_not_json(api, session):
    before = _world()
    for body in (b"{not json", b'{"events": [', b"\xff\xfe"):
        _assert_error(_raw_post(api, f"/sessions/{session.pk}/events", body), 400)
        _assert_error(_raw_post(api, "/sessions", body), 400)
    assert _world() == before


# --- 401 ------------------------------------------------------------------------------------


def test_it_answers_401_without_a_valid_key_and_writes_nothing(api, project, session, api_key):
    prefix = api_key[0].prefix
    revoked_key, revoked_raw = make_api_key(project, name="old")
    revoke_api_key(revoked_key, actor=Actor.system())
    before = _world()
    for headers in (
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer not-a-key"},
        {"Authorization": f"Bearer sb_{prefix}_wrong-secret"},
        {"Authorization": f"Basic {api_key[1]}"},
        {"Authorization": f"Bearer {revoked_raw}"},
    ):
        client = ApiClient(None)
        client.headers = headers
        for response in (
            client.get(f"/sessions/{session.pk}"),
            client.get("/sessions"),
            client.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}]}),
            client.post("/sessions", {"agent": "intruder"}),
        ):
            _assert_error(response, 401, "unauthorized")
    assert _world() == before


# --- 404 / 405 ------------------------------------------------------------------------------


def test_it_answers_404_for_a_session_that_does_not_exist(api):
    missing = uuid.uuid4()
    error = _assert_error(api.get(f"/sessions/{missing}"), 404, "not_found")
    assert error["detail"] == {"session_id": str(missing)}
    _assert_error(api.post(f"/sessions/{missing}/events", {"events": [{"kind": "note"}]}), 404)
    _assert_error(api.post(f"/sessions/{missing}/close", {}), 404)


def test_it_answers_405_for_methods_a_path_does_not_serve(api, session):
    before = _world()
    for _prefix, router in ninja_api._routers:
        for path, path_view in router.path_operations.items():
            served = {m for op in path_view.operations for m in op.methods}
            url = "/api/v1" + path.replace("{session_id}", str(session.pk))
            if "{" in url:
                continue  # another app's ids
            for method in {"GET", "POST", "PUT", "PATCH", "DELETE"} - served:
                response = api.client.generic(
                    method, url, b"{}", content_type="application/json", headers=api.headers
                )
                error = _assert_error(response, 405, "method_not_allowed")
                assert set(response["Allow"].split(", ")) == served, (method, url)
                assert error["detail"] == {"allowed": response["Allow"]}
    assert _world() == before


def test_it_answers_404_in_the_error_shape_for_an_unknown_api_path(api):
    _assert_error(api.get("/no-such-endpoint"), 404, "not_found")
    _assert_error(api.post("/sessions/not/a/route", {}), 404, "not_found")


# --- 413 ------------------------------------------------------------------------------------


def test_it_refuses_a_body_over_the_limit_by_content_length_before_parsing(api, session, settings):
    settings.SWITCHBOARD_MAX_BODY_BYTES = 2000
    before = _world()
    body = json.dumps({"events": [{"kind": "note", "content": {"pad": "x" * 3000}}]}).encode()
    error = _assert_error(
        _raw_post(api, f"/sessions/{session.pk}/events", body), 413, "payload_too_large"
    )
    assert error["detail"] == {"limit": 2000, "size": len(body)}
    # Not even parsed: an oversize body that is not JSON is still a 413, not a 400.
    _assert_error(_raw_post(api, f"/sessions/{session.pk}/events", b"{" * 2500), 413)
    assert _world() == before
    small = api.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}]})
    assert small.status_code == 201


def test_it_refuses_an_event_over_the_event_limit_and_writes_none_of_the_batch(
    api, session, settings
):
    settings.SWITCHBOARD_MAX_EVENT_BYTES = 500
    before = _world()
    response = api.post(
        f"/sessions/{session.pk}/events",
        {
            "events": [
                {"kind": "note", "content": {"ok": 1}},
                {"kind": "message", "content": {"text": "y" * 600}},
            ]
        },
    )
    error = _assert_error(response, 413, "payload_too_large")
    assert error["detail"]["index"] == 1 and error["detail"]["limit"] == 500
    assert _world() == before


@pytest.mark.parametrize("text", ["é" * 100, "😀" * 50], ids=["two-byte", "four-byte"])
def test_the_event_limit_counts_ascii_escaped_json_to_the_byte(api, session, settings, text):
    """{"t":"<text>"} is 608 characters with each character escaped (\\u00e9, or a surrogate
    pair), 208 bytes of UTF-8: one byte over the limit is refused, at the limit it is taken,
    whatever shortcut the check takes for content well within it (events.py)."""
    content = {"t": text}
    settings.SWITCHBOARD_MAX_EVENT_BYTES = 607
    before = _world()
    refused = api.post(
        f"/sessions/{session.pk}/events",
        {"events": [{"kind": "note", "content": {"ok": 1}}, {"kind": "note", "content": content}]},
    )
    error = _assert_error(refused, 413, "payload_too_large")
    assert error["detail"] == {"index": 1, "limit": 607, "size": 608}
    assert _world() == before
    settings.SWITCHBOARD_MAX_EVENT_BYTES = 608
    taken = api.post(
        f"/sessions/{session.pk}/events", {"events": [{"kind": "note", "content": content}]}
    )
    assert taken.status_code == 201, taken.json()


def test_it_refuses_a_batch_over_the_event_count_limit(api, session, settings):
    settings.SWITCHBOARD_MAX_BATCH_EVENTS = 5
    before = _world()
    response = api.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}] * 6})
    _assert_error(response, 413, "payload_too_large")
    assert _world() == before


# --- 422 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"agent": ""},
        {"agent": "a", "metadata": "not an object"},
        {"agent": "a", "budget": {"max_tokens": -1}},
        {"agent": "a", "budget": {"max_cost": "lots"}},
        {"agent": "a", "title": "t" * 301},
        # Larger than the column: the client's mistake, not an outage.
        {"agent": "a", "budget": {"max_tokens": 2**70}},
    ],
)
def test_it_refuses_an_invalid_session_with_422_and_opens_nothing(api, body):
    before = _world()
    _assert_error(api.post("/sessions", body), 422, "invalid_input")
    assert _world() == before


def test_it_answers_422_for_a_session_id_that_is_not_a_uuid(api):
    _assert_error(api.get("/sessions/not-a-uuid"), 422, "invalid_input")


# --- 500 ------------------------------------------------------------------------------------


def test_it_hides_an_unexpected_error_behind_the_error_shape(api, session, monkeypatch):
    def explode(*args, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr("sessions_app.api.state_at", explode)
    response = api.get(f"/sessions/{session.pk}/state")
    _assert_error(response, 500, "internal_error")
    assert b"secret internals" not in response.content


# --- 429 and 503: settings fixed at start-up, so a real server process -----------------------


@pytest.mark.slow
def test_it_answers_429_when_a_key_exceeds_its_rate(transactional_db, project):
    session = make_session(project)
    raw = make_api_key(project)[1]
    other_raw = make_api_key(project, name="second")[1]
    with asgi_server(
        SWITCHBOARD_API_RATE_PER_MINUTE="3", CACHE_KEY_PREFIX=f"throttle-test-{uuid.uuid4()}"
    ) as base_url:
        client = httpx.Client(
            base_url=f"{base_url}/api/v1", headers={"Authorization": f"Bearer {raw}"}
        )
        url = f"/sessions/{session.pk}/events"
        # The limit counts per clock minute: start well inside one so all four requests share it.
        while time.time() % 60 > 45:
            time.sleep(0.5)
        statuses = [
            client.post(url, json={"events": [{"kind": "note"}]}).status_code for _ in range(3)
        ]
        assert statuses == [201, 201, 201]
        throttled = client.post(url, json={"events": [{"kind": "note"}]})
        assert throttled.status_code == 429
        assert throttled.headers["content-type"] == "application/json"
        body = throttled.json()
        assert set(body["error"]) == {"code", "message", "detail"}
        assert body["error"]["code"] == "rate_limited"
        assert int(throttled.headers["Retry-After"]) >= 1
        # The limit is per key.
        other = httpx.get(
            f"{base_url}/api/v1/sessions/{session.pk}",
            headers={"Authorization": f"Bearer {other_raw}"},
        )
        assert other.status_code == 200
    session.refresh_from_db()
    assert session.head_seq == 3  # the throttled request wrote nothing


@pytest.mark.slow
def test_it_answers_503_when_the_database_is_unreachable():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with asgi_server(
        DATABASE_URL=f"postgres://postgres@127.0.0.1:{port}/switchboard", DB_POOL_TIMEOUT="1"
    ) as base_url:
        for method, path in (("GET", "/sessions"), ("POST", "/sessions")):
            response = httpx.request(
                method,
                f"{base_url}/api/v1{path}",
                json={"agent": "a"},
                headers={"Authorization": "Bearer sb_abcd1234_secret"},
                timeout=30,
            )
            assert response.status_code == 503, response.text
            assert response.headers["content-type"] == "application/json"
            assert response.json()["error"]["code"] == "unavailable"
            assert set(response.json()["error"]) == {"code", "message", "detail"}
            assert "Traceback" not in response.text


def test_it_refuses_a_forged_list_cursor_with_422(api, project):
    import base64

    forged = base64.urlsafe_b64encode(b'["2024-01-01T00:00:00+00:00", "nope"]').decode()
    for path in ("/sessions", "/tasks"):
        _assert_error(api.get(path, {"cursor": forged}), 422, "invalid_input")


def test_it_refuses_numbers_beyond_the_columns_with_422_and_writes_nothing(api, session):
    before = _world()
    too_big = 2**31
    for body in (
        {"events": [{"kind": "note", "tokens": too_big}]},
        {"events": [{"kind": "note"}], "expected_head_seq": too_big},
    ):
        _assert_error(api.post(f"/sessions/{session.pk}/events", body), 422, "invalid_input")
    _assert_error(
        api.post("/sessions", {"agent": "a", "budget": {"max_tokens": 2**63}}), 422, "invalid_input"
    )
    _assert_error(api.get(f"/sessions/{session.pk}/events", {"after_seq": too_big}), 422)
    assert _world() == before
