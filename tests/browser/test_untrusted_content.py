"""What agents write is shown as text, never run: on the first render and in live pushes."""

import httpx
import pytest
from playwright.sync_api import expect

from sessions_app.services.events import EventDraft
from tests.browser.conftest import sign_in
from tests.dashboard.conftest import Team, append, fact, message, team  # noqa: F401
from tests.factories import make_api_key, make_session

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = "<script>window.__xss=1</script>"
IMG = '<img src=x onerror="window.__xss=1">'


def assert_nothing_ran(page) -> None:
    assert page.evaluate("window.__xss") is None
    # No element was made from the payloads, so no handler can fire later either.
    assert page.evaluate("document.querySelectorAll('main img, main script').length") == 0


def test_script_and_handler_payloads_are_shown_as_text(team: Team, live_url, page):
    session = make_session(team.project, title=IMG, metadata={"note": SCRIPT})
    append(
        session,
        message(SCRIPT),
        message(IMG, role="assistant"),
        fact(IMG, SCRIPT),
        EventDraft(kind="note", content={"html": SCRIPT}),
    )
    _, raw_key = make_api_key(team.project)

    sign_in(page, live_url, team.viewer.username)
    page.goto(f"{live_url}/sessions/{session.pk}/")
    expect(page.locator("#event-1 .event-text")).to_have_text(SCRIPT)
    expect(page.locator("#event-2 .event-text")).to_have_text(IMG)
    expect(page.get_by_role("heading", level=1)).to_have_text(IMG)
    expect(page.locator("#facts-panel dl.facts dt")).to_have_text(IMG)
    expect(page.locator("#facts-panel dl.facts dd")).to_contain_text(SCRIPT)
    page.locator("#event-4 details.event-json summary").click()
    expect(page.locator("#event-4 pre.json")).to_contain_text('"html": "<script>window.__xss=1')
    assert_nothing_ran(page)

    # The same payloads pushed live over the websocket.
    expect(page.locator(".live-dot.on")).to_be_attached()
    response = httpx.post(
        f"{live_url}/api/v1/sessions/{session.pk}/events",
        json={
            "events": [
                {"kind": "message", "role": "user", "content": {"text": IMG}},
                {"kind": "message", "role": "user", "content": {"text": SCRIPT}},
            ]
        },
        headers={"Authorization": f"Bearer {raw_key}"},
        timeout=10,
    )
    assert response.status_code == 201, response.text
    expect(page.locator("#event-5 .event-text")).to_have_text(IMG, timeout=5_000)
    expect(page.locator("#event-6 .event-text")).to_have_text(SCRIPT, timeout=5_000)
    assert_nothing_ran(page)

    # And in the sessions list, where the title is a link.
    page.goto(f"{live_url}/p/{team.project.pk}/sessions/")
    expect(page.locator(f"#session-row-{session.pk} a").first).to_have_text(IMG)
    assert_nothing_ran(page)
