"""What whoever runs Switchboard expects: /healthz, /readyz, /metrics, and logs with request ids.

Against the real PostgreSQL and Redis; "down" is a dead port or a silent listener of our own,
never the shared servers.
"""

import io
import json
import logging
import socket
import threading

import pytest
from asgiref.sync import async_to_sync
from django.db import connections
from django.test import Client
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from config.celery import app as celery_app
from core.actors import Actor
from core.logging import JsonFormatter, RequestIdFilter
from core.metrics import PREFIX
from core.models import Membership, OutboxMessage
from core.tasks import relay_outbox
from sessions_app.services.lifecycle import pause_session
from tests.dashboard.conftest import team  # noqa: F401  (the personas fixture)
from tests.factories import make_session
from tests.realtime.test_consumers import cookie_for
from tests.realtime.test_consumers import socket as ws_socket

TOKEN = "metrics-token-for-tests"


def dead_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get_json(client: Client, path: str, **headers):
    response = client.get(path, headers=headers)
    return response, json.loads(response.content)


# --- /healthz ---------------------------------------------------------------------------------


def test_it_answers_healthz_without_the_database_or_a_session(
    db, django_assert_num_queries, monkeypatch
):
    monkeypatch.setitem(connections["default"].settings_dict, "PORT", dead_port())
    client = Client(enforce_csrf_checks=True)
    with django_assert_num_queries(0):
        response, body = get_json(client, "/healthz")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert body == {"status": "ok"}
    assert not response.cookies  # no session, no CSRF cookie


def test_it_refuses_writes_to_healthz(db):
    assert Client().post("/healthz").status_code == 405


# --- /readyz ----------------------------------------------------------------------------------


def test_it_answers_ready_with_every_check(db, settings):
    assert settings.REDIS_URL, "the suite runs with Redis (tests/settings.py)"
    response, body = get_json(Client(), "/readyz")
    assert response.status_code == 200, body
    assert body == {
        "status": "ok",
        "checks": {"database": {"ok": True}, "migrations": {"ok": True}, "redis": {"ok": True}},
        "failed": [],
    }
    assert not response.cookies


def test_it_leaves_redis_out_when_redis_url_is_unset(db, settings):
    settings.REDIS_URL = ""
    response, body = get_json(Client(), "/readyz")
    assert response.status_code == 200
    assert set(body["checks"]) == {"database", "migrations"}


def test_it_names_the_database_when_it_is_unreachable(db, monkeypatch):
    settings_dict = connections["default"].settings_dict
    monkeypatch.setitem(settings_dict, "HOST", "127.0.0.1")
    monkeypatch.setitem(settings_dict, "PORT", dead_port())
    response, body = get_json(Client(), "/readyz")
    assert response.status_code == 503
    assert body["status"] == "unavailable"
    assert body["failed"] == ["database", "migrations"]
    assert body["checks"]["database"]["ok"] is False
    assert body["checks"]["redis"] == {"ok": True}


def test_it_answers_even_when_the_database_never_speaks(db, monkeypatch):
    """A host that accepts the TCP connection and then says nothing (a hung server): the check's
    own connect timeout ends it. Without one, libpq waits forever and the request never ends."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    settings_dict = connections["default"].settings_dict
    monkeypatch.setitem(settings_dict, "HOST", "127.0.0.1")
    monkeypatch.setitem(settings_dict, "PORT", silent.getsockname()[1])
    answers = []
    worker = threading.Thread(target=lambda: answers.append(Client().get("/readyz")), daemon=True)
    try:
        worker.start()
        worker.join(60)  # a guard against hanging the suite, not a speed assertion
    finally:
        silent.close()
    assert answers, "/readyz did not answer while the database was silent"
    assert answers[0].status_code == 503
    assert json.loads(answers[0].content)["failed"] == ["database", "migrations"]


def test_it_names_redis_when_it_is_unreachable(db, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{dead_port()}/0"
    response, body = get_json(Client(), "/readyz")
    assert response.status_code == 503
    assert body["failed"] == ["redis"]
    assert body["checks"]["database"] == {"ok": True}
    assert body["checks"]["redis"]["ok"] is False


@pytest.mark.django_db(transaction=True)
def test_it_is_not_ready_with_a_migration_missing():
    from django.db.migrations.recorder import MigrationRecorder

    row = MigrationRecorder.Migration.objects.get(app="core", name="0001_initial")
    applied = row.applied
    row.delete()
    try:
        response, body = get_json(Client(), "/readyz")
    finally:
        MigrationRecorder.Migration.objects.create(app="core", name="0001_initial", applied=applied)
    assert response.status_code == 503
    assert body["failed"] == ["migrations"]
    assert "core.0001_initial" in body["checks"]["migrations"]["missing"]


# --- /metrics ---------------------------------------------------------------------------------


def test_it_hides_metrics_by_default(db, settings):
    settings.SWITCHBOARD_METRICS_TOKEN = ""
    response = Client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 404
    assert json.loads(response.content)["error"]["code"] == "not_found"


def test_it_requires_the_metrics_token(db, settings):
    settings.SWITCHBOARD_METRICS_TOKEN = TOKEN
    client = Client()
    assert client.get("/metrics").status_code == 401
    wrong = client.get("/metrics", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert wrong["WWW-Authenticate"].startswith("Bearer")
    right = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert right.status_code == 200
    assert right["Content-Type"].startswith("text/plain")
    assert not right.cookies


def scrape(client: Client) -> dict[str, list]:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    return {
        family.name: family.samples
        for family in text_string_to_metric_families(response.content.decode())
    }


def value(samples, name: str, **labels) -> float | None:
    for sample in samples:
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
            return sample.value
    return None


def test_it_scrapes_every_metric_family_after_an_append(
    project, api, settings, django_capture_on_commit_callbacks
):
    settings.SWITCHBOARD_METRICS_TOKEN = TOKEN
    before = REGISTRY.get_sample_value(f"{PREFIX}events_appended_total", {"kind": "note"}) or 0
    with django_capture_on_commit_callbacks(execute=True):
        opened = api.post("/sessions", {"agent": "metrics-agent"})
        session_id = opened.json()["id"]
        appended = api.post(
            f"/sessions/{session_id}/events",
            {"events": [{"kind": "note", "content": {}}, {"kind": "note", "content": {}}]},
        )
    assert appended.status_code in (200, 201), appended.content
    paused = make_session(project, title="waits for a human")
    pause_session(paused, actor=Actor.system("tests"), reason="handoff")
    OutboxMessage.objects.create(project=project, type="test.unsent", groups=[], payload={})
    relay_outbox.apply()  # in this process, through Celery's tracer: its signals fire

    families = scrape(Client())

    for family in [
        "http_request_duration_seconds",
        "events_appended",
        "sessions",
        "paused_sessions",
        "paused_session_oldest_age_seconds",
        "outbox_unsent",
        "websocket_connections",
        "job_duration_seconds",
    ]:
        assert PREFIX + family in families, family
    requests = families[f"{PREFIX}http_request_duration_seconds"]
    route = "api/v1/sessions/<session_id>/events"
    assert value(requests, f"{PREFIX}http_request_duration_seconds_count", route=route) >= 1
    assert not any(session_id in str(s.labels) for s in requests)  # routes, never raw paths
    appended_now = value(
        families[f"{PREFIX}events_appended"], f"{PREFIX}events_appended_total", kind="note"
    )
    assert appended_now == before + 2
    sessions = families[f"{PREFIX}sessions"]
    assert value(sessions, f"{PREFIX}sessions", status="paused") == 1
    assert value(sessions, f"{PREFIX}sessions", status="open") == 1
    assert value(sessions, f"{PREFIX}sessions", status="archived") == 0
    assert families[f"{PREFIX}paused_sessions"][0].value == 1
    assert families[f"{PREFIX}paused_session_oldest_age_seconds"][0].value >= 0
    assert families[f"{PREFIX}outbox_unsent"][0].value >= 1
    jobs = families[f"{PREFIX}job_duration_seconds"]
    count = f"{PREFIX}job_duration_seconds_count"
    assert value(jobs, count, task="core.relay_outbox", state="SUCCESS") >= 1


@pytest.mark.django_db(transaction=True)
def test_it_counts_open_websockets(team, settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    assert Membership.objects.filter(user=team.viewer, project=team.project).exists()
    session = make_session(team.project, title="watched")
    cookie = cookie_for(team.viewer)
    name = f"{PREFIX}websocket_connections"

    async def scenario():
        start = REGISTRY.get_sample_value(name)
        ws = ws_socket(f"/ws/sessions/{session.pk}/", cookie)
        connected, _ = await ws.connect()
        assert connected
        during = REGISTRY.get_sample_value(name)
        await ws.disconnect()
        after = REGISTRY.get_sample_value(name)
        refused = ws_socket(f"/ws/sessions/{session.pk}/")  # anonymous: never accepted
        connected, _ = await refused.connect()
        assert not connected
        await refused.disconnect()
        return start, during, after, REGISTRY.get_sample_value(name)

    start, during, after, after_refused = async_to_sync(scenario)()
    assert during == start + 1
    assert after == start
    assert after_refused == start


# --- logs -------------------------------------------------------------------------------------


@pytest.fixture
def json_log():
    """The JSON formatter and request-id filter that LOG_FORMAT=json installs, on a buffer."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    yield buffer
    root.removeHandler(handler)


def log_lines(buffer: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_it_logs_json_with_the_request_id_the_response_carries(db, json_log):
    response = Client().get("/no-such-page", headers={"X-Request-ID": "lb-7f3a.42"})
    assert response.status_code == 404
    assert response["X-Request-ID"] == "lb-7f3a.42"
    lines = [line for line in log_lines(json_log) if line["logger"] == "django.request"]
    assert lines, json_log.getvalue()
    assert lines[0]["request_id"] == "lb-7f3a.42"
    assert lines[0]["level"] == "WARNING"
    assert "/no-such-page" in lines[0]["message"]


def test_it_replaces_an_insane_request_id(db, json_log):
    response = Client().get("/no-such-page", headers={"X-Request-ID": "x" * 500})
    rid = response["X-Request-ID"]
    assert rid != "x" * 500 and len(rid) == 32
    lines = [line for line in log_lines(json_log) if line["logger"] == "django.request"]
    assert lines[0]["request_id"] == rid


@celery_app.task(name="tests.log_a_line")
def log_a_line() -> None:
    logging.getLogger("tests.job").warning("inside a job")


def test_it_logs_the_task_id_inside_a_job(json_log):
    log_a_line.apply(task_id="job-123")
    logging.getLogger("tests.job").warning("after the job")
    lines = [line for line in log_lines(json_log) if line["logger"] == "tests.job"]
    assert lines[0]["request_id"] == "job-123"
    assert "request_id" not in lines[1]


MULTIPROCESS_WRITER = """
from core import metrics  # a worker's increments: they need no settings
metrics.count_events(["note", "note"])
metrics.JOB_SECONDS.labels("core.relay_outbox", "SUCCESS").observe(0.2)
"""
MULTIPROCESS_READER = """
import django; django.setup()
from core import metrics
metrics._scrape_hooks.clear()  # the database's gauges are not what this checks
print(metrics.render()[0].decode())
"""


def test_it_adds_up_processes_in_multiprocess_mode(tmp_path):
    """A Celery worker's job metrics reach the web process's /metrics through the folder."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    for script in (MULTIPROCESS_WRITER, MULTIPROCESS_WRITER):
        subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=60)
    scraped = subprocess.run(
        [sys.executable, "-c", MULTIPROCESS_READER],
        env=env,
        check=True,
        timeout=60,
        capture_output=True,
        text=True,
    ).stdout
    families = {f.name: f.samples for f in text_string_to_metric_families(scraped)}
    events = families[f"{PREFIX}events_appended"]
    assert value(events, f"{PREFIX}events_appended_total", kind="note") == 4
    jobs = families[f"{PREFIX}job_duration_seconds"]
    count = f"{PREFIX}job_duration_seconds_count"
    assert value(jobs, count, task="core.relay_outbox", state="SUCCESS") == 2
