"""The handoff loop in two browsers and an agent, on one real uvicorn (issue 10's browser test).

The agent asks over the HTTP API → the request appears live in both operators' queues →
operator A claims → B sees it claimed, live, and has nothing to act with → A edits the proposed
arguments (previewed as a diff), approves and hands back → the agent's long-poll returns the
edited action → the session is resumed and its page shows the handoff records. Then a
take-over: A takes the session over, writes two human messages (the agent is kept out) and
closes the session.
"""

import json
import re
import threading
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from core.models import Role
from tests.browser.conftest import sign_in
from tests.browser.test_content_security_policy import watched  # noqa: F401  (the CSP watch)
from tests.dashboard.conftest import Team, append, message, state, team  # noqa: F401
from tests.factories import make_api_key, make_member, make_session

pytestmark = pytest.mark.django_db(transaction=True)

LIVE_MS = 5_000
SHOTS = Path("/work/notes/shots")

APPROVAL = {
    "action_request": {
        "action": "refund",
        "args": {"order": "A-1001", "amount": "120.00", "currency": "EUR"},
    },
    "config": {
        "allow_accept": True,
        "allow_edit": True,
        "allow_respond": True,
        "allow_ignore": True,
    },
    "description": "The parcel arrived two weeks late; the customer asks for a refund.",
}


class Agent:
    def __init__(self, live_url: str, raw_key: str) -> None:
        self.client = httpx.Client(
            base_url=f"{live_url}/api/v1",
            headers={"Authorization": f"Bearer {raw_key}"},
            timeout=40,
        )

    def ask(self, session_id, kind: str, payload: dict, reason: str) -> dict:
        response = self.client.post(
            f"/sessions/{session_id}/handoffs",
            json={"kind": kind, "reason": reason, "payload": payload, "priority": "high"},
        )
        assert response.status_code == 201, response.text
        return response.json()

    def long_poll(self, handoff_id: str, into: dict) -> threading.Thread:
        def run() -> None:
            started = time.monotonic()
            response = self.client.get(f"/handoffs/{handoff_id}", params={"wait": 30})
            into["status_code"] = response.status_code
            into["body"] = response.json()
            into["waited"] = time.monotonic() - started

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def session(self, session_id) -> dict:
        response = self.client.get(f"/sessions/{session_id}")
        assert response.status_code == 200, response.text
        return response.json()

    def append(self, session_id, text: str) -> httpx.Response:
        return self.client.post(
            f"/sessions/{session_id}/events",
            json={"events": [{"kind": "message", "role": "assistant", "content": {"text": text}}]},
        )


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_two_operators_and_an_agent_through_approval_and_takeover(
    team: Team, live_url, page, browser
):
    alice = make_member(team.project, Role.OPERATOR, "alice")
    bob = make_member(team.project, Role.OPERATOR, "bob")
    session = make_session(team.project, agent="refunds", title="Refund for order A-1001")
    append(
        session,
        message("My parcel came two weeks late. I want a refund."),
        message("Let me check the order.", role="assistant"),
        state({"stage": "refund", "order": "A-1001"}),
    )
    _, raw_key = make_api_key(team.project)
    agent = Agent(live_url, raw_key)
    queue_url = f"{live_url}/p/{team.project.pk}/handoffs/"

    page_a = page
    context_b = browser.new_context(viewport={"width": 1280, "height": 900})
    page_b = context_b.new_page()
    queue_b = context_b.new_page()
    try:
        sign_in(page_a, live_url, alice.username)
        sign_in(page_b, live_url, bob.username)
        for p in (page_a, queue_b):
            p.goto(queue_url)
            expect(p.locator("#queue-rows tr.queue-row")).to_have_count(0)
            expect(p.locator(".live-dot.on")).to_be_attached()

        # 1. The agent asks; the request appears in both queues without a reload.
        started = time.monotonic()
        handoff = agent.ask(session.pk, "approval", APPROVAL, "Refund 120 EUR for a late parcel?")
        row = f"#handoff-row-{handoff['id']}"
        for p in (page_a, queue_b):
            p.wait_for_selector(row, timeout=LIVE_MS)
        print(f"\nnew request -> row in both queues: {(time.monotonic() - started) * 1000:.0f} ms")
        expect(page_a.locator(row)).to_contain_text("Refund 120 EUR")
        expect(page_a.locator(row)).to_contain_text("Approval")
        expect(page_a.locator("#nav-handoff-count")).to_have_text("1")
        shot(page_a, "handoff-queue-live")

        # 2. Both open the workspace; A claims; B sees who holds it, live, with no actions.
        workspace = f"{live_url}/handoffs/{handoff['id']}/"
        page_b.goto(workspace)
        expect(page_b.locator("#claim-button")).to_be_visible()
        expect(page_b.locator(".live-dot.on")).to_be_attached()
        page_a.goto(workspace)
        expect(page_a.locator(".live-dot.on")).to_be_attached()
        page_a.click("#claim-button")
        expect(page_a.locator(".you-hold")).to_be_visible()
        expect(page_a.locator("#handoff-holder")).to_contain_text("alice")
        expect(page_b.locator(".held-by-other")).to_contain_text("alice", timeout=LIVE_MS)
        expect(page_b.locator("#claim-button")).to_have_count(0)
        for control in ("#accept-button", "#reject-button", "#edit-args", "#hand-back-button"):
            expect(page_b.locator(control)).to_have_count(0)
        expect(queue_b.locator(f"{row} td.holder")).to_have_text("alice", timeout=LIVE_MS)
        # B cannot act even by posting directly: the service refuses, naming the holder.
        refused = page_b.evaluate(
            """async (url) => {
                const token = JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRFToken'];
                const r = await fetch(url, {method: 'POST', headers: {'X-CSRFToken': token, 'HX-Request': 'true'}});
                return [r.status, await r.text()];
            }""",
            f"{workspace}accept/",
        )
        assert refused[0] == 409 and "Only the person holding" in refused[1], refused

        # 3. The agent waits (long-poll) while A edits the arguments, previews, approves.
        polled: dict = {}
        poller = agent.long_poll(handoff["id"], polled)
        edited = {"order": "A-1001", "amount": "60.00", "currency": "EUR", "note": "half refund"}
        page_a.fill("#edit-args", json.dumps(edited, indent=2))
        page_a.click("#preview-edit-button")
        diff = page_a.locator("#preview-diff")
        expect(diff.locator(".diff-del")).to_contain_text(["120.00"])
        expect(diff.locator(".diff-add")).to_contain_text(["60.00", "half refund"])
        shot(page_a, "handoff-workspace-preview")
        assert polled == {}, "nothing may be sent by a preview"
        page_a.click("#confirm-button")
        expect(page_a.locator("#action-result .notice")).to_contain_text("edited arguments")
        expect(page_a.locator("#handoff-status")).to_have_text("Answered")
        poller.join(timeout=15)
        assert polled["status_code"] == 200, polled
        answer = polled["body"]["answer"]
        assert polled["body"]["status"] == "answered"
        assert answer["type"] == "edit" and answer["args"] == edited, answer
        assert answer["original_args"] == APPROVAL["action_request"]["args"]
        print(f"agent's long-poll returned {polled['waited'] * 1000:.0f} ms after it began")
        expect(page_b.locator("#handoff-status")).to_have_text("Answered", timeout=LIVE_MS)

        page_a.fill("#hand-back-reason", "Refund half, as edited.")
        page_a.once("dialog", lambda dialog: dialog.accept())  # "Hand the session back …?"
        page_a.click("#hand-back-button")
        expect(page_a.locator("#handoff-status")).to_have_text("Handed back")
        shot(page_a, "handoff-workspace-handed-back")
        assert agent.session(session.pk)["status"] == "resumed"

        # 4. The session page's timeline tells the story in words.
        page_a.goto(f"{live_url}/sessions/{session.pk}/")
        timeline = page_a.locator("#timeline")
        expect(timeline).to_contain_text("approval: asked for a person")
        expect(timeline).to_contain_text("approval: claimed by alice")
        expect(timeline).to_contain_text("approval: approved with edited arguments by alice")
        expect(timeline).to_contain_text("approval: handed back by alice")

        # 5. Take-over: A writes two human messages while the agent is kept out, then closes.
        takeover = agent.ask(session.pk, "takeover", {}, "The customer wants a person.")
        page_a.goto(f"{live_url}/handoffs/{takeover['id']}/")
        page_a.click("#claim-button")
        expect(page_a.locator(".you-hold")).to_be_visible()
        page_a.click("#take-over-button")
        expect(page_a.locator("#human-message")).to_be_visible()
        for text in ("Hello, I am Alice from support.", "Your refund of 60 EUR is on its way."):
            page_a.fill("#human-message", text)
            page_a.click("#send-message-button")
            expect(page_a.locator("#message-rows")).to_contain_text(text)
            expect(page_a.locator("#human-message")).to_have_value("")
        kept_out = agent.append(session.pk, "I can take it from here.")
        assert (
            kept_out.status_code == 409 and kept_out.json()["error"]["code"] == "session_taken_over"
        )
        shot(page_a, "handoff-workspace-takeover")
        page_a.once("dialog", lambda dialog: dialog.accept())
        page_a.click("#close-button")
        expect(page_a.locator("#handoff-status")).to_have_text("Closed")
        assert agent.session(session.pk)["status"] == "closed"
        humans = page_a.locator("#conversation article.event .event-role", has_text="human")
        expect(humans).to_have_count(2)
    finally:
        context_b.close()


def test_the_handoff_pages_work_under_the_policy_with_no_violation(team: Team, live_url, watched):
    """The strict CSP: the queue (live), the workspace, its claim, preview and heartbeat markup
    run on static files and htmx alone."""
    page = watched
    session = make_session(team.project, agent="refunds", title="Refund")
    append(session, message("Refund please."))
    _, raw_key = make_api_key(team.project)
    handoff = Agent(live_url, raw_key).ask(session.pk, "approval", APPROVAL, "Refund?")
    sign_in(page, live_url, team.operator.username)
    page.goto(f"{live_url}/p/{team.project.pk}/handoffs/")
    expect(page.locator(".live-dot.on")).to_be_attached()
    page.get_by_label("Approval").check()  # htmx swaps the results and pushes the URL
    expect(page).to_have_url(re.compile(r"kind=approval"))
    expect(page.locator(f"#handoff-row-{handoff['id']}")).to_be_visible()
    page.check_policy("queue")
    page.goto(f"{live_url}/handoffs/{handoff['id']}/")
    expect(page.locator(".live-dot.on")).to_be_attached()
    page.click("#claim-button")
    expect(page.locator('#handoff-holder[data-lease-mine="true"]')).to_be_attached()
    page.fill("#edit-args", '{"order": "A-1001"}')
    page.click("#preview-edit-button")
    expect(page.locator("#preview-diff .diff-del")).not_to_have_count(0)
    page.check_policy("workspace")
