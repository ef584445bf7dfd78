"""The agent's handoff endpoints: request, list, read (long-poll), cancel; every bad input a
clear 4xx in the one error shape with nothing written."""

import threading
import time

import pytest
from django.db import connection

from core.models import AuditEntry, OutboxMessage
from handoffs_app.models import Handoff
from handoffs_app.services import handoffs as svc
from sessions_app.models import Event
from tests.factories import make_session

from .helpers import APPROVAL, QUESTION, operator


@pytest.fixture
def session(project):
    return make_session(project)


def post_handoff(api, session, **body):
    body.setdefault("kind", "approval")
    body.setdefault("payload", APPROVAL)
    return api.post(f"/sessions/{session.pk}/handoffs", body)


def assert_error(response, status, code=None):
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert set(error) == {"code", "message", "detail"} and error["message"]
    if code:
        assert error["code"] == code, error
    return error


def nothing_written(session, head_before):
    session.refresh_from_db()
    return (
        session.head_seq == head_before
        and not Handoff.objects.filter(session=session, status="open")
        .exclude(idempotency_key="first")
        .exists()
    )


def test_it_creates_a_handoff_and_pauses_the_session(api, session):
    response = post_handoff(api, session, reason="refund above limit", priority="high")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "open" and body["kind"] == "approval"
    assert body["priority"] == "high"
    assert body["allowed_answers"] == ["accept", "edit", "respond"]
    session.refresh_from_db()
    assert session.status == "paused"
    handoff = Handoff.objects.get(pk=body["id"])
    assert handoff.requested_by.startswith("key:")


def test_a_second_open_request_is_409_and_the_same_key_the_original(api, session):
    first = post_handoff(api, session, idempotency_key="first")
    assert first.status_code == 201
    replay = post_handoff(api, session, idempotency_key="first")
    assert replay.status_code == 200 and replay.json()["id"] == first.json()["id"]
    second = post_handoff(api, session, kind="question", payload=QUESTION)
    error = assert_error(second, 409, "handoff_already_open")
    assert error["detail"]["handoff_id"] == first.json()["id"]
    assert Handoff.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "escalate"}, "kind"),
        ({"kind": "budget", "payload": {}}, "kind"),
        ({"payload": {"config": APPROVAL["config"]}}, "payload"),
        ({"payload": {**APPROVAL, "action_request": {"action": "refund"}}}, "payload"),
        ({"payload": {**APPROVAL, "config": {"allow_accept": "yes"}}}, "payload"),
        (
            {"payload": {**APPROVAL, "config": {**APPROVAL["config"], "allow_everything": True}}},
            "payload",
        ),
        ({"kind": "question", "payload": {"choices": ["a"]}}, "payload"),
        ({"kind": "question", "payload": {"question": "q", "choices": "a,b"}}, "payload"),
        ({"priority": "asap"}, "priority"),
    ],
)
def test_bad_requests_are_422_and_write_nothing(api, session, body, field):
    session.refresh_from_db()
    head = session.head_seq
    error = assert_error(post_handoff(api, session, **body), 422)
    assert error["detail"]["field"] == field
    session.refresh_from_db()
    assert (session.head_seq, session.status) == (head, "open")
    assert not Handoff.objects.exists()
    assert not AuditEntry.objects.filter(action__startswith="handoff.").exists()
    assert not OutboxMessage.objects.filter(type__startswith="handoff.").exists()


def test_schema_violations_are_422_in_the_one_shape(api, session):
    assert_error(post_handoff(api, session, due_in=0), 422, "invalid_input")
    assert_error(post_handoff(api, session, payload="refund"), 422, "invalid_input")
    assert not Handoff.objects.exists()


def test_another_projects_ids_are_404(api, other_api, session):
    assert_error(post_handoff(other_api, session), 404, "not_found")
    handoff_id = post_handoff(api, session).json()["id"]
    assert_error(other_api.get(f"/handoffs/{handoff_id}"), 404, "not_found")
    assert_error(other_api.get(f"/handoffs/{handoff_id}?wait=1"), 404, "not_found")
    assert_error(other_api.post(f"/handoffs/{handoff_id}/cancel"), 404, "not_found")
    assert other_api.get("/handoffs").json()["handoffs"] == []
    assert Handoff.objects.get().status == "open"


def test_it_lists_by_status_with_a_cursor(api, project):
    ids = []
    for _ in range(5):
        ids.append(post_handoff(api, make_session(project)).json()["id"])
    api.post(f"/handoffs/{ids[0]}/cancel")
    page = api.get("/handoffs?status=open&limit=2").json()
    assert [h["id"] for h in page["handoffs"]] == [ids[4], ids[3]]
    rest = api.get(f"/handoffs?status=open&limit=2&cursor={page['next_cursor']}").json()
    assert [h["id"] for h in rest["handoffs"]] == [ids[2], ids[1]]
    assert rest["next_cursor"] is None
    cancelled = api.get("/handoffs?status=cancelled").json()["handoffs"]
    assert [h["id"] for h in cancelled] == [ids[0]]
    assert_error(api.get("/handoffs?status=lost"), 422)
    assert_error(api.get("/handoffs?cursor=forged"), 422)


def test_cancel_then_answering_is_refused(api, project, session):
    handoff_id = post_handoff(api, session).json()["id"]
    response = api.post(f"/handoffs/{handoff_id}/cancel", {"reason": "never mind"})
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    session.refresh_from_db()
    assert session.status == "resumed"
    assert_error(api.post(f"/handoffs/{handoff_id}/cancel"), 409, "handoff_not_active")
    user = operator(project)
    handoff = Handoff.objects.get(pk=handoff_id)
    head = session.head_seq
    with pytest.raises(Exception) as refused:
        svc.accept(handoff, user=user)
    assert (refused.value.status, refused.value.code) == (409, "handoff_not_active")
    session.refresh_from_db()
    assert session.head_seq == head


def test_read_without_wait_answers_at_once(api, session):
    handoff_id = post_handoff(api, session).json()["id"]
    started = time.monotonic()
    response = api.get(f"/handoffs/{handoff_id}")
    assert response.status_code == 200 and response.json()["status"] == "open"
    assert time.monotonic() - started < 1
    assert_error(api.get(f"/handoffs/{handoff_id}?wait=61"), 422)
    assert_error(api.get("/handoffs/not-a-uuid"), 422)


def test_a_wait_times_out_with_the_current_status(api, session):
    handoff_id = post_handoff(api, session).json()["id"]
    started = time.monotonic()
    response = api.get(f"/handoffs/{handoff_id}?wait=1")
    elapsed = time.monotonic() - started
    assert response.json()["status"] == "open"
    assert 0.9 <= elapsed < 3


@pytest.mark.requires_redis("the long-poll woken through the channel layer")
def test_a_wait_returns_when_the_handoff_is_answered(transactional_db, api, project):
    session = make_session(project)
    user = operator(project)
    handoff_id = post_handoff(api, session).json()["id"]
    handoff = Handoff.objects.get(pk=handoff_id)
    svc.claim_handoff(handoff, user=user)

    def answer_soon():
        time.sleep(0.5)
        try:
            svc.edit_and_accept(handoff, user=user, args={"order": "A-1001", "amount": "99.00"})
        finally:
            connection.close()

    thread = threading.Thread(target=answer_soon)
    started = time.monotonic()
    thread.start()
    response = api.get(f"/handoffs/{handoff_id}?wait=20")
    elapsed = time.monotonic() - started
    thread.join()
    body = response.json()
    assert body["status"] == "answered"
    assert body["answer"]["args"]["amount"] == "99.00"
    assert 0.4 < elapsed < 5


def test_the_log_shows_the_records(api, project, session):
    handoff_id = post_handoff(api, session).json()["id"]
    user = operator(project)
    handoff = Handoff.objects.get(pk=handoff_id)
    svc.claim_handoff(handoff, user=user)
    svc.accept(handoff, user=user)
    svc.hand_back(handoff, user=user)
    events = api.get(f"/sessions/{session.pk}/events?kind=handoff").json()["events"]
    assert [e["content"]["step"] for e in events] == [
        "requested",
        "claimed",
        "answered",
        "handed_back",
    ]
    assert all(e["tier"] == "durable" and e["actor"] for e in events)
    # Agents cannot write handoff records themselves.
    forged = api.post(
        f"/sessions/{session.pk}/events",
        {"events": [{"kind": "handoff", "content": {"step": "answered"}}]},
    )
    assert_error(forged, 422)
    assert Event.objects.filter(session=session, kind="handoff").count() == 4
