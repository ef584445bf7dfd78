"""Under a WSGI server, the outbox rows a request commits are relayed once its response has
been handed to the server (request_finished), not before: the agent's fork answers without
waiting for the relay's claim, Redis send and commit. The row is durable at commit either way;
a relay that fails after the response leaves it to the relay job."""

import json

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.test import RequestFactory
from django.utils import timezone

from core.domain_events import RELAY_GRACE, relay_pending
from core.models import OutboxMessage
from core.realtime import project_list_group
from tests.factories import make_api_key, make_session

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.requires_redis("live relay")]

QUIET = 0.6


def fork_request(project, session) -> dict:
    _key, raw = make_api_key(project)
    request = RequestFactory().post(
        f"/api/v1/sessions/{session.pk}/fork",
        data=json.dumps({"at_seq": 0}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}"},
        SERVER_NAME="localhost",
    )
    return request.environ


def serve(environ: dict) -> tuple[str, object]:
    """Call Django's WSGI handler as a WSGI server does; the response is not closed yet."""
    status: list[str] = []
    response = WSGIHandler()(environ, lambda s, headers, exc_info=None: status.append(s))
    return status[0], response


def opened_rows() -> list[OutboxMessage]:
    return list(OutboxMessage.objects.filter(type="session.opened").order_by("id"))


def test_the_fork_is_relayed_after_its_response_is_handed_over(project, listen):
    session = make_session(project)
    heard = listen(project_list_group(project.pk, "sessions"))
    OutboxMessage.objects.all().delete()

    status, response = serve(fork_request(project, session))
    assert status.startswith("201")
    fork_id = json.loads(b"".join(response))["id"]
    [row] = opened_rows()
    assert row.payload["session_id"] == fork_id
    assert row.relayed_at is None  # committed, not yet relayed: the response went first
    assert heard.receive_all(QUIET) == []

    response.close()  # the server is done with the response: request_finished
    row.refresh_from_db()
    assert row.relayed_at is not None
    assert [m["session_id"] for m in heard.receive_all(QUIET)] == [fork_id]


def test_a_relay_that_fails_after_the_response_leaves_the_row_to_the_relay_job(
    project, listen, monkeypatch
):
    from core import realtime

    session = make_session(project)
    OutboxMessage.objects.all().delete()
    status, response = serve(fork_request(project, session))
    assert status.startswith("201")
    monkeypatch.setattr(realtime, "_submit", lambda *a, **k: (_ for _ in ()).throw(OSError("down")))
    response.close()  # no exception reaches the server
    [row] = opened_rows()
    assert row.relayed_at is None
    monkeypatch.undo()
    heard = listen(project_list_group(project.pk, "sessions"))
    assert relay_pending(now=timezone.now() + RELAY_GRACE) == 1
    assert [m["type"] for m in heard.receive_all(QUIET)] == ["session.opened"]


def test_outside_a_wsgi_request_the_relay_runs_at_commit(project, api):
    """The test client (and Celery, the shell) relay at commit, as before."""
    session = make_session(project)
    OutboxMessage.objects.all().delete()
    assert api.post(f"/sessions/{session.pk}/fork", {"at_seq": 0}).status_code == 201
    [row] = opened_rows()
    assert row.relayed_at is not None
