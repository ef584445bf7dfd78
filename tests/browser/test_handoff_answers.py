"""Two of the inbox's answers in a real browser, with an agent long-polling over HTTP on one real
uvicorn (issue 26 §4):

- an operator ignores an approval that allows it: the "Ignore" button is there, the handoff ends
  `ignored`, and the agent's long-poll gets it (answer type "ignore") so it goes on without the
  action; a request that does not allow ignoring shows no such button;
- an operator edits the proposed arguments through form fields made from the agent's JSON
  Schema: a value the schema refuses is named and nothing is sent; corrected, previewed and
  approved, the agent's long-poll receives typed arguments (a number, an integer, a boolean).
"""

import pytest
from playwright.sync_api import expect

from core.models import Role
from tests.browser.conftest import sign_in
from tests.browser.test_handoff_loop import APPROVAL, Agent
from tests.dashboard.conftest import Team, append, message, team  # noqa: F401
from tests.factories import make_api_key, make_member, make_session

pytestmark = pytest.mark.django_db(transaction=True)

STRICT = {**APPROVAL, "config": {**APPROVAL["config"], "allow_ignore": False}}
SCHEMA_APPROVAL = {
    "action_request": {
        "action": "refund",
        "args": {
            "order": "A-1001",
            "amount": 120.0,
            "parcels": 1,
            "notify": True,
            "channel": "email",
            "note": "Parcel two weeks late.",
            "address": {"city": "Lyon", "zip": "69001"},
        },
        "args_schema": {
            "type": "object",
            "required": ["order", "amount"],
            "properties": {
                "order": {"type": "string", "title": "Order", "pattern": "^A-[0-9]+$"},
                "amount": {
                    "type": "number",
                    "title": "Amount (EUR)",
                    "description": "At most the order's total, 150 EUR.",
                    "minimum": 0,
                    "multipleOf": 0.01,
                },
                "parcels": {"type": "integer", "title": "Parcels refunded", "minimum": 1},
                "notify": {"type": "boolean", "title": "Tell the customer by e-mail"},
                "channel": {"type": "string", "title": "Channel", "enum": ["email", "sms"]},
                "note": {"type": "string", "title": "Note for the ledger", "maxLength": 500},
                "address": {"type": "object"},
            },
        },
    },
    "config": {
        "allow_accept": True,
        "allow_edit": True,
        "allow_respond": False,
        "allow_ignore": False,
    },
    "description": "The parcel arrived two weeks late; the customer asks for a refund.",
}


def claimed_workspace(page, live_url, handoff_id):
    page.goto(f"{live_url}/handoffs/{handoff_id}/")
    expect(page.locator(".live-dot.on")).to_be_attached()
    page.click("#claim-button")
    expect(page.locator(".you-hold")).to_be_visible()


def test_an_operator_ignores_a_request_and_the_agent_goes_on(
    team: Team, live_url, page, screenshot
):
    alice = make_member(team.project, Role.OPERATOR, "alice")
    session = make_session(team.project, agent="refunds", title="Refund for order A-1001")
    append(session, message("My parcel came two weeks late. I want a refund."))
    strict_session = make_session(team.project, agent="refunds", title="Another refund")
    _, raw_key = make_api_key(team.project)
    agent = Agent(live_url, raw_key)
    handoff = agent.ask(session.pk, "approval", APPROVAL, "Refund 120 EUR for a late parcel?")
    strict = agent.ask(strict_session.pk, "approval", STRICT, "Refund without ignoring?")
    sign_in(page, live_url, alice.username)

    # A request that does not allow ignoring offers no Ignore (nor Reject).
    claimed_workspace(page, live_url, strict["id"])
    expect(page.locator("#accept-button")).to_be_visible()
    expect(page.locator("#ignore-button")).to_have_count(0)
    expect(page.locator("#reject-button")).to_have_count(0)

    claimed_workspace(page, live_url, handoff["id"])
    expect(page.locator("#ignore-button")).to_be_visible()
    expect(page.locator("#request-title + p")).to_be_visible()
    screenshot("answers_ignore_button")

    polled: dict = {}
    poller = agent.long_poll(handoff["id"], polled)
    page.once("dialog", lambda dialog: dialog.accept())  # "Ignore this request? …"
    page.click("#ignore-button")
    expect(page.locator("#handoff-status")).to_have_text("Ignored")
    expect(page.locator("#action-result .notice")).to_contain_text(
        "the agent goes on without the action"
    )
    expect(page.locator(".answer-given")).to_contain_text("Ignored by alice")
    expect(page.locator("#handoff-actions")).to_contain_text("This handoff is ignored")
    expect(page.locator("#records")).to_contain_text("ignored by alice")
    poller.join(timeout=15)
    assert polled["status_code"] == 200, polled
    assert polled["body"]["status"] == "ignored"
    assert polled["body"]["answer"]["type"] == "ignore"
    assert polled["body"]["answer"]["args"] is None
    # Nothing to hand back: the session is the agent's again.
    assert agent.session(session.pk)["status"] == "resumed"
    screenshot("answers_ignored")


def test_an_operator_edits_through_schema_fields_and_the_agent_gets_typed_args(
    team: Team, live_url, page, screenshot
):
    alice = make_member(team.project, Role.OPERATOR, "alice")
    session = make_session(team.project, agent="refunds", title="Refund for order A-1001")
    append(session, message("My parcel came two weeks late. I want a refund."))
    _, raw_key = make_api_key(team.project)
    agent = Agent(live_url, raw_key)
    handoff = agent.ask(session.pk, "approval", SCHEMA_APPROVAL, "Refund with fields")
    sign_in(page, live_url, alice.username)
    claimed_workspace(page, live_url, handoff["id"])

    fields = page.locator("#schema-fields")
    expect(page.locator("#edit-args")).to_have_count(0)
    expect(page.get_by_label("Order")).to_have_value("A-1001")
    expect(page.get_by_label("Amount (EUR)")).to_have_value("120.0")
    expect(page.get_by_label("Parcels refunded")).to_have_value("1")
    expect(page.get_by_label("Tell the customer by e-mail")).to_be_checked()
    expect(page.get_by_label("Channel")).to_have_value("email")
    expect(fields).to_contain_text("At most the order's total, 150 EUR.")
    expect(page.locator("#edit-args-rest")).to_contain_text('"city": "Lyon"')
    screenshot("answers_schema_fields")

    # A value the schema refuses (the browser cannot know "multipleOf"): named under the form,
    # nothing sent, the page and the typed value kept (tests/browser/test_workspace_refusals.py).
    polled: dict = {}
    poller = agent.long_poll(handoff["id"], polled)
    page.get_by_label("Amount (EUR)").fill("80.005")
    page.click("#preview-edit-button")
    refusal = page.get_by_role("alert")
    expect(refusal).to_contain_text("Amount (EUR): must be a multiple of 0.01.")
    expect(refusal).to_contain_text("Nothing was changed")
    screenshot("answers_schema_refused")
    assert polled == {}, "nothing may reach the agent"
    expect(page.get_by_label("Amount (EUR)")).to_have_value("80.005")

    page.get_by_label("Amount (EUR)").fill("80.5")
    page.get_by_label("Parcels refunded").fill("2")
    page.get_by_label("Tell the customer by e-mail").uncheck()
    page.get_by_label("Channel").select_option("sms")
    page.click("#preview-edit-button")
    diff = page.locator("#preview-diff")
    expect(diff.locator(".diff-add")).to_contain_text(['"amount": 80.5'])
    assert polled == {}, "nothing may be sent by a preview"
    page.click("#confirm-button")
    expect(page.locator("#handoff-status")).to_have_text("Answered")
    poller.join(timeout=15)
    assert polled["status_code"] == 200, polled
    answer = polled["body"]["answer"]
    assert answer["type"] == "edit"
    assert answer["args"] == {
        "order": "A-1001",
        "amount": 80.5,
        "parcels": 2,
        "notify": False,
        "channel": "sms",
        "note": "Parcel two weeks late.",
        "address": {"city": "Lyon", "zip": "69001"},
    }
    assert isinstance(answer["args"]["parcels"], int) and answer["args"]["notify"] is False
