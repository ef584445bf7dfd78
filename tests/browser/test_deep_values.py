"""A state nested deeper than the readers walk, stored before nesting was bounded: the session
page and the handoff workspace show everything else and say, where the state would be, why it
cannot be shown (issue 23, defect 1). Screenshots in test-artifacts/."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in
from tests.dashboard.conftest import Team, append, message, state, team  # noqa: F401
from tests.dashboard.test_deep_values import nested, store_before_the_bound
from tests.factories import make_session
from tests.handoffs.helpers import ask

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_pages_show_why_a_deep_stored_state_cannot_be_shown(
    team: Team, live_url, page, screenshot
):
    session = make_session(team.project, agent="refunds", title="Stored before the bound")
    append(session, state({"stage": "ok"}), message("Where is my refund?"))
    store_before_the_bound(session, "state", nested(950))
    append(session, message("Still here after it."))
    handoff = ask(session, "question")

    sign_in(page, live_url, team.operator.username)
    page.goto(f"{live_url}/sessions/{session.pk}/")
    inspector = page.locator("#inspector .inline-error")
    expect(inspector).to_contain_text("The state event at seq 3 holds JSON nested deeper than")
    expect(page.locator("#facts-panel .inline-error")).to_contain_text("cannot be shown")
    expect(page.locator("#event-3")).to_contain_text("nested deeper than 200 levels")
    expect(page.locator("#event-4 .event-text")).to_have_text("Still here after it.")
    screenshot("deep-state-session-page")

    page.goto(f"{live_url}/sessions/{session.pk}/?at=1")
    expect(page.locator("#inspector pre.json")).to_contain_text('"stage": "ok"')

    page.goto(f"{live_url}/handoffs/{handoff.pk}/")
    expect(page.locator("#state-panel .inline-error")).to_contain_text("cannot be read here")
    expect(page.locator("main")).to_contain_text("Ship to the old address?")
    screenshot("deep-state-handoff-workspace")
