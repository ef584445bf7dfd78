"""The demo's handoffs: seed_demo leaves some waiting of every kind (one overdue, one held by
the demo operator); simulate_agents asks for approval over the HTTP API of a real server,
waits by long-poll, and carries out the (edited) action or stops when refused."""

import io
import random
import time

import pytest
from django.core.management import call_command

from core.models import Project
from handoffs_app.models import ACTIVE_STATUSES, Handoff
from handoffs_app.services.handoffs import claim_handoff, edit_and_accept, reject
from sessions_app.models import Event, Session
from switchboard.management.commands.simulate_agents import AgentApi, Simulator
from tests.factories import make_api_key
from tests.servers import asgi_server

pytestmark = pytest.mark.django_db(transaction=True)


def test_seed_demo_leaves_handoffs_of_every_kind_waiting():
    call_command("seed_demo", "--force", "--long-log", "30", stdout=io.StringIO())
    project = Project.objects.get(name="demo")
    active = Handoff.objects.filter(project=project, status__in=ACTIVE_STATUSES)
    assert {h.kind for h in active} == {"question", "approval", "takeover", "budget"}
    assert active.filter(overdue=True).count() == 1
    held = active.filter(status="claimed")
    assert [h.lease_holder.username for h in held] == ["operator"]
    assert active.filter(status="open").count() >= 4
    # Their sessions wait for a person.
    assert {s.status for s in Session.objects.filter(handoffs__in=active)} == {"paused"}


def wait_for(predicate, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.mark.parametrize("decision", ["edit", "reject"])
def test_simulated_agent_waits_for_the_answer_and_follows_it(project, decision):
    from tests.factories import make_member

    person = make_member(project, "operator")
    _, raw_key = make_api_key(project)
    with asgi_server() as base_url:
        api = AgentApi(base_url, raw_key)
        simulator = Simulator(api, random.Random(1), lambda line: None)
        opened = api.call("POST", "/sessions", {"agent": "support-triage", "title": "refunds"})
        current = {"id": opened["id"], "turn": 4, "status": "open"}
        simulator.sessions["support-triage"] = current
        simulator.ask_for_approval("support-triage", current, 4)
        handoff = Handoff.objects.get(session_id=opened["id"])
        assert handoff.kind == "approval" and handoff.status == "open"
        simulator.follow_handoff("support-triage", current)  # nothing yet: still waiting
        assert current["handoff"]["outcome"] is None
        claim_handoff(handoff, user=person)
        if decision == "edit":
            edit_and_accept(
                handoff, user=person, args={"order": "1", "amount": "42.00", "currency": "USD"}
            )
        else:
            reject(handoff, user=person, reason="not eligible")
        wait_for(lambda: current["handoff"]["outcome"])  # the long-poll returned
        simulator.follow_handoff("support-triage", current)
    session = Session.objects.get(pk=opened["id"])
    if decision == "edit":
        call = Event.objects.get(session=session, kind="tool_call")
        assert call.content == {
            "name": "issue_refund",
            "arguments": {"order": "1", "amount": "42.00", "currency": "USD"},
        }
        assert current["status"] == "open"
    else:
        assert session.status == "closed"
        assert current["status"] == "closed"


def test_seed_demo_prints_the_address_scripts_run_serves(monkeypatch):
    """Issue 13, defect 6: with PORT (and HOST) set, the sign-in address says so."""
    monkeypatch.setenv("PORT", "8765")
    monkeypatch.setenv("HOST", "0.0.0.0")
    out = io.StringIO()
    call_command("seed_demo", "--force", "--long-log", "0", stdout=out)
    assert "Sign in at http://0.0.0.0:8765/ with one of:" in out.getvalue()
    monkeypatch.delenv("PORT")
    monkeypatch.delenv("HOST")
    out = io.StringIO()
    call_command("seed_demo", "--force", stdout=out)
    assert "Sign in at http://127.0.0.1:8000/ with one of:" in out.getvalue()
