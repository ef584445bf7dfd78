"""A workspace form's refusal (400 "Check your input") shows under the form, in #action-result,
with the page kept around it and what the operator typed kept, in a real browser against the
live server (DEBUG on, as the demo runs). django-htmx's debug helper, which the base template
no longer loads, wrote every 400 answer of an htmx request over the whole document: the page
went and only the fragment stayed.

- "Edit and approve" with arguments that are not JSON (an approval without a schema);
- a schema field with a value the agent's JSON Schema refuses (multipleOf);
- "Patch the working state" with a patch that is not JSON (the same swap for every form);
- without JavaScript the same form is a plain POST and gets the friendly full error page.
"""

import pytest
from playwright.sync_api import expect

from core.models import Role
from tests.browser.conftest import sign_in
from tests.browser.test_handoff_answers import SCHEMA_APPROVAL, claimed_workspace
from tests.browser.test_handoff_loop import APPROVAL, Agent
from tests.dashboard.conftest import Team, append, message, team  # noqa: F401
from tests.factories import make_api_key, make_member, make_session

pytestmark = pytest.mark.django_db(transaction=True)

CUSTOMER = "My parcel came two weeks late. I want a refund."


def expect_refused_inline(page, says: str) -> None:
    """The refusal sits in #action-result and the rest of the workspace is still there."""
    refusal = page.locator("#action-result .inline-error[role=alert]")
    expect(refusal).to_contain_text(says)
    expect(refusal).to_contain_text("Nothing was changed")
    expect(page.locator("#handoff-request")).to_be_visible()
    expect(page.locator("#conversation")).to_contain_text(CUSTOMER)
    expect(page.locator("#handoff-status")).to_have_text("Claimed")
    expect(page.locator(".you-hold")).to_be_visible()


def test_refusals_show_under_the_form_and_keep_the_page(
    team: Team, live_url, browser, browser_context_args, page, screenshot
):
    alice = make_member(team.project, Role.OPERATOR, "alice")
    raw_session = make_session(team.project, agent="refunds", title="Refund, raw arguments")
    append(raw_session, message(CUSTOMER))
    schema_session = make_session(team.project, agent="refunds", title="Refund, schema fields")
    append(schema_session, message(CUSTOMER))
    _, raw_key = make_api_key(team.project)
    agent = Agent(live_url, raw_key)
    raw = agent.ask(raw_session.pk, "approval", APPROVAL, "Refund 120 EUR for a late parcel?")
    schema = agent.ask(schema_session.pk, "approval", SCHEMA_APPROVAL, "Refund with fields")
    sign_in(page, live_url, alice.username)

    # Raw JSON arguments that do not parse.
    claimed_workspace(page, live_url, raw["id"])
    page.fill("#edit-args", '{"order": "A-1001", "amount": ')
    page.click("#preview-edit-button")
    expect_refused_inline(page, "Check your input")
    expect(page.locator("#edit-args")).to_have_value('{"order": "A-1001", "amount": ')
    expect(page.locator("#preview")).to_have_count(0)

    # The same swap for the state panel's form: a patch that is not JSON.
    page.locator(".patch-state summary").click()
    page.fill("#state-patch", "{stage: approved")
    page.click("#preview-state-button")
    expect_refused_inline(page, "Check your input")
    expect(page.locator("#state-patch")).to_have_value("{stage: approved")

    # A schema field's value the schema refuses (the browser cannot know "multipleOf").
    claimed_workspace(page, live_url, schema["id"])
    page.get_by_label("Amount (EUR)").fill("80.005")
    page.click("#preview-edit-button")
    expect_refused_inline(page, "Amount (EUR): must be a multiple of 0.01.")
    expect(page.get_by_label("Amount (EUR)")).to_have_value("80.005")
    expect(page.get_by_label("Order")).to_have_value("A-1001")
    expect(page.locator("#preview")).to_have_count(0)
    page.locator("#action-result").scroll_into_view_if_needed()
    screenshot("answers_schema_refused")

    # Without JavaScript the button posts its form (form="hf-edit") as a plain request: the
    # friendly full page says why, with the navigation around it.
    no_js = browser.new_context(
        **browser_context_args,
        java_script_enabled=False,
        storage_state=page.context.storage_state(),
    )
    plain = no_js.new_page()
    plain.goto(f"{live_url}/handoffs/{raw['id']}/")
    plain.fill("#edit-args", "[not json")
    plain.click("#preview-edit-button")
    expect(plain.locator("h1")).to_have_text("Check your input")
    expect(plain.locator(".error-page")).to_contain_text("Nothing was changed")
    expect(plain.locator(".topbar")).to_be_visible()
    no_js.close()

    # Nothing was answered: both requests are still held, unanswered.
    for handoff in (raw, schema):
        seen = agent.client.get(f"/handoffs/{handoff['id']}").json()
        assert (seen["status"], seen["answer"]) == ("claimed", None), seen
