"""While a person has taken a session over, the agent's appends answer 409 session_taken_over
on every append path (one statement, keyed/transactional, COPY-sized batch); hand-back restores
them."""

import pytest

from handoffs_app.services import handoffs as svc
from tests.factories import make_session

from .helpers import ask, operator

BATCHES = {
    "one statement": [{"kind": "note", "content": {"n": 1}}],
    "keyed": [{"kind": "note", "content": {"n": 1}, "idempotency_key": "k-1"}],
    "copy": [{"kind": "note", "content": {"n": i}} for i in range(20)],
}


@pytest.mark.parametrize("path", list(BATCHES))
def test_agent_appends_are_refused_during_a_take_over(api, project, path):
    session = make_session(project)
    user = operator(project)
    handoff = ask(session, kind="takeover")
    svc.claim_handoff(handoff, user=user)
    svc.take_over(handoff, user=user)
    session.refresh_from_db()
    head = session.head_seq
    response = api.post(f"/sessions/{session.pk}/events", {"events": BATCHES[path]})
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["code"] == "session_taken_over"
    assert error["detail"]["taken_over_by"] == f"user:{user.username}"
    session.refresh_from_db()
    assert session.head_seq == head
    svc.hand_back(handoff, user=user)
    response = api.post(f"/sessions/{session.pk}/events", {"events": BATCHES[path]})
    assert response.status_code == 201, response.content


def test_a_budgeted_session_is_refused_too(api, project):
    session = make_session(project, budget_max_tokens=10_000)
    user = operator(project)
    handoff = ask(session, kind="takeover")
    svc.claim_handoff(handoff, user=user)
    svc.take_over(handoff, user=user)
    response = api.post(f"/sessions/{session.pk}/events", {"events": BATCHES["one statement"]})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "session_taken_over"


def test_budget_overrun_over_the_api_opens_a_budget_handoff(api, project):
    session = make_session(project, budget_max_tokens=100)
    response = api.post(
        f"/sessions/{session.pk}/events",
        {
            "events": [
                {"kind": "message", "role": "assistant", "content": {"text": "x"}, "tokens": 101}
            ]
        },
    )
    assert response.status_code == 201
    assert response.json()["status"] == "paused"
    listed = api.get("/handoffs?status=open").json()["handoffs"]
    assert [(h["kind"], h["session_id"]) for h in listed] == [("budget", str(session.pk))]
    assert listed[0]["allowed_answers"] == ["budget"]
