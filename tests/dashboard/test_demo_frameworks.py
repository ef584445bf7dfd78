"""seed_demo runs one agent per agent framework (issue 25 §3): a LangGraph graph, an OpenAI
Agents SDK agent and an ADK agent, scripted (no model calls), through the real adapters over
the HTTP API (answered in process: no server runs yet). Each leaves a session an operator can
read and a request to a person waiting in the queue, asked through the framework's own human
in the loop."""

import io
import time

import pytest
from django.core.management import call_command

from core.models import ApiKey, Project
from handoffs_app.models import Handoff
from handoffs_app.services.handoffs import accept, claim_handoff
from sessions_app.models import Event, Session
from switchboard.management import framework_agents
from tests.factories import make_api_key, make_member, make_project
from tests.servers import asgi_server

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(transactional_db):
    return make_project()


@pytest.fixture
def demo(settings):
    settings.DEBUG = True  # seed_demo refuses with DEBUG off (published passwords)
    out = io.StringIO()
    call_command("seed_demo", "--long-log", "0", stdout=out)
    return Project.objects.get(name="demo"), out.getvalue()


def test_one_agent_per_framework_with_a_session_and_a_request_waiting(demo):
    project, printed = demo
    assert framework_agents.installed() == ["langgraph", "openai-agents", "adk"]
    for framework, agent in framework_agents.AGENTS.items():
        (session,) = Session.objects.filter(project=project, agent__name=agent)
        assert f"{agent} ({framework}): " in printed
        asked = Handoff.objects.get(session=session)
        assert (asked.kind, asked.status) == ("approval", "open"), framework
        assert session.status == "paused"  # waiting for the person
        assert session.head_seq >= 5, framework
    # What each framework's adapter wrote, as an operator reads it.
    langgraph = Session.objects.get(agent__name="langgraph-returns")
    assert langgraph.external_id == "demo/langgraph-demo-1"
    assert Event.objects.filter(session=langgraph, kind="note").count() >= 4  # checkpoints
    assert Handoff.objects.get(session=langgraph).payload["action_request"]["action"] == (
        "refund_return"
    )
    openai = Session.objects.get(agent__name="openai-refunds")
    said = list(
        Event.objects.filter(session=openai, kind="message").values_list("role", "content__text")
    )
    assert said[:2] == [
        ("user", "My order 7781 arrived damaged."),
        ("assistant", "I found your order 7781: 2 items, 540.00 USD, arrived damaged."),
    ]
    assert Handoff.objects.get(session=openai).payload["action_request"] == {
        "action": "issue_refund",
        "args": {"order_id": "7781", "amount": 540.0},
    }
    adk = Session.objects.get(agent__name="adk:shop")
    assert Event.objects.filter(session=adk, kind="tool_call").exists()
    assert Handoff.objects.get(session=adk).payload["action_request"]["args"] == {
        "plan": "team",
        "refund_days": 21,
    }
    # The key the seed used is revoked.
    assert ApiKey.objects.get(project=project, name="seed_demo frameworks").revoked_at


@pytest.mark.django_db(transaction=True)
def test_simulate_agents_framework_episodes_wait_for_the_person_and_finish(project):
    """simulate_agents' framework agents (LiveEpisodes) against a real server: each episode
    asks, a person approves in the queue (here through the services, as the dashboard does),
    and the framework's run finishes with the answer."""
    person = make_member(project, "operator")
    _, raw_key = make_api_key(project)
    said: list[str] = []
    with asgi_server() as base_url:
        episodes = framework_agents.LiveEpisodes(base_url, raw_key, said.append)
        for _ in framework_agents.FRAMEWORKS:
            episodes.step(0.5, 0.9)  # not this time
            episodes.step(0.5, 0.1)
        assert sum("started" in line for line in said) == 3
        answered = set()
        deadline = time.monotonic() + 120
        while len(answered) < 3:
            assert time.monotonic() < deadline, said
            for handoff in Handoff.objects.filter(project=project, status="open"):
                claim_handoff(handoff, user=person)
                accept(handoff, user=person)
                answered.add(handoff.session.agent.name)
            time.sleep(0.1)
        for thread in episodes._running.values():
            thread.join(timeout=60)
    finished = sorted(line for line in said if "finished" in line)
    assert answered == set(framework_agents.AGENTS.values())
    assert len(finished) == 3, said
    assert "adk:shop" in finished[0] and "settled as our reviewer decided" in finished[0]
    assert "langgraph-returns" in finished[1] and "refund decision: accept" in finished[1]
    assert "openai-refunds" in finished[2] and "settled as the reviewer decided" in finished[2]
