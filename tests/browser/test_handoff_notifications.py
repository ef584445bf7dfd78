"""Browser notifications of waiting handoffs (issue 26 §4): a person who opted in ("Notify me",
permission asked on the click) gets a Notification when an agent asks for a person, or a
handoff becomes overdue, while the tab is hidden, on any project page (the navigation's feed, or
the queue's own); clicking it opens the handoff. None while the tab is visible, none with the
toggle off.

The page's `new Notification(...)` calls are recorded by an init script that stands in for the
constructor (headless chromium shows no notification of its own), and the tab's visibility is
set by another (document.visibilityState, document.hidden): a real hidden tab cannot be made
in one headless window.
"""

import time
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone
from playwright.sync_api import expect

from core.models import Role
from handoffs_app.models import Handoff
from handoffs_app.services.jobs import enforce_sla_batch
from tests.browser.conftest import ARTIFACTS, sign_in
from tests.browser.test_content_security_policy import watched  # noqa: F401  (the CSP watch)
from tests.dashboard.conftest import Team, team  # noqa: F401
from tests.factories import make_api_key, make_member, make_session

pytestmark = pytest.mark.django_db(transaction=True)

LIVE_MS = 8_000

RECORD_NOTIFICATIONS = """
(() => {
  const Real = window.Notification;
  window.__notifications = [];
  window.__tabHidden = false;
  class Recorded extends Real {
    constructor(title, options) {
      const shown = {title: String(title), body: String((options || {}).body || ""),
                     onclick: null, close() { shown.closed = true; }};
      window.__notifications.push(shown);
      return shown;  // recorded, not shown (a derived constructor may return its own object)
    }
  }
  window.Notification = Recorded;
  Object.defineProperty(Document.prototype, "visibilityState",
    {configurable: true, get() { return window.__tabHidden ? "hidden" : "visible"; }});
  Object.defineProperty(Document.prototype, "hidden",
    {configurable: true, get() { return window.__tabHidden; }});
})();
"""

APPROVAL = {
    "action_request": {"action": "refund", "args": {"order": "A-1001", "amount": "120.00"}},
    "config": {
        "allow_accept": True,
        "allow_edit": True,
        "allow_respond": True,
        "allow_ignore": False,
    },
    "description": "Refund a late parcel.",
}


def agent_asks(live_url, raw_key, project, reason: str) -> str:
    session = make_session(project, agent="refunds", title=reason)
    response = httpx.post(
        f"{live_url}/api/v1/sessions/{session.pk}/handoffs",
        json={"kind": "approval", "reason": reason, "payload": APPROVAL},
        headers={"Authorization": f"Bearer {raw_key}"},
        timeout=20,
    )
    assert response.status_code == 201, response.text
    return response.json()["id"]


def hide_tab(page, hidden: bool = True) -> None:
    page.evaluate(
        "h => { window.__tabHidden = h; document.dispatchEvent(new Event('visibilitychange')); }",
        hidden,
    )


def notifications(page) -> list[dict]:
    return page.evaluate("window.__notifications.map(n => ({title: n.title, body: n.body}))")


def wait_for_notifications(page, count: int) -> list[dict]:
    """Polled from here: the page's policy refuses the eval wait_for_function's string needs."""
    deadline = time.monotonic() + LIVE_MS / 1000
    while len(shown := notifications(page)) < count:
        assert time.monotonic() < deadline, f"{len(shown)} of {count} notifications: {shown}"
        page.wait_for_timeout(100)
    return shown


def opted_in_page(browser, live_url, user, watched_page=None):
    context = watched_page.context if watched_page else browser.new_context()
    context.grant_permissions(["notifications"], origin=live_url)
    page = watched_page or context.new_page()
    page.add_init_script(RECORD_NOTIFICATIONS)
    sign_in(page, live_url, user.username)
    return page


def test_an_agents_request_and_an_overdue_one_notify_a_hidden_tab_and_open_it(
    team: Team, live_url, watched, browser
):
    alice = make_member(team.project, Role.OPERATOR, "alice")
    _, raw_key = make_api_key(team.project)
    page = opted_in_page(browser, live_url, alice, watched)
    page.goto(f"{live_url}/p/{team.project.pk}/")  # the overview: the navigation's feed
    toggle = page.locator("#notify-toggle")
    expect(toggle).to_have_text("Notify me")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(toggle).to_have_text("Notifying")
    assert page.evaluate(f"localStorage.getItem('switchboard.notify.{team.project.pk}')") == "on"
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("header.topbar").screenshot(path=str(ARTIFACTS / "notify_toggle.png"))
    expect(page.locator("[data-live-nav]")).to_be_attached()
    page.wait_for_timeout(500)  # the navigation's socket joins its group

    hide_tab(page)
    reason = "Refund <b>120 EUR</b> for a late parcel?"
    handoff_id = agent_asks(live_url, raw_key, team.project, reason)
    [shown] = wait_for_notifications(page, 1)
    assert shown == {"title": "Handoff waiting: approval from refunds", "body": reason}
    expect(page.locator("#nav-handoff-count")).to_have_text("1")

    # The SLA job marks it overdue (in another process in production; the same service here).
    Handoff.objects.filter(pk=handoff_id).update(due_at=timezone.now() - timedelta(minutes=1))
    assert enforce_sla_batch().overdue == 1
    assert wait_for_notifications(page, 2)[1]["title"] == "Handoff overdue: approval from refunds"

    # Clicking it brings the tab forward on the handoff's workspace.
    page.evaluate("window.__notifications[1].onclick()")
    page.wait_for_url(f"{live_url}/handoffs/{handoff_id}/")
    expect(page.locator("h1")).to_contain_text("Refund")
    page.check_policy("notifications")


def test_no_notification_while_the_tab_is_visible_or_the_toggle_is_off(
    team: Team, live_url, browser
):
    bob = make_member(team.project, Role.OPERATOR, "bob")
    _, raw_key = make_api_key(team.project)
    page = opted_in_page(browser, live_url, bob)
    try:
        page.goto(f"{live_url}/p/{team.project.pk}/handoffs/")  # the queue's own feed
        page.locator("#notify-toggle").click()
        expect(page.locator("#notify-toggle")).to_have_attribute("aria-pressed", "true")
        expect(page.locator(".live-dot.on")).to_be_attached()
        page.wait_for_timeout(500)

        agent_asks(live_url, raw_key, team.project, "Seen on screen")  # the tab is visible
        expect(page.locator("#nav-handoff-count")).to_have_text("1", timeout=LIVE_MS)
        hide_tab(page)
        agent_asks(live_url, raw_key, team.project, "Asked while away")
        assert [n["body"] for n in wait_for_notifications(page, 1)] == ["Asked while away"]

        page.locator("#notify-toggle").click()  # off again
        expect(page.locator("#notify-toggle")).to_have_attribute("aria-pressed", "false")
        agent_asks(live_url, raw_key, team.project, "Asked with the toggle off")
        expect(page.locator("#nav-handoff-count")).to_have_text("3", timeout=LIVE_MS)
        expect(page.locator("#handoff-notify-marks li")).to_have_count(3)
        page.wait_for_timeout(300)
        assert len(notifications(page)) == 1
        # The choice is kept per project: a reload stays off.
        page.reload()
        expect(page.locator("#notify-toggle")).to_have_attribute("aria-pressed", "false")
    finally:
        page.context.close()


def test_an_admin_sets_the_digest_in_the_console(team: Team, live_url, watched):
    page = watched
    sign_in(page, live_url, team.admin.username)
    page.goto(f"{live_url}/p/{team.project.pk}/settings/")
    page.locator(".console-nav").get_by_role("link", name="Handoff digest").click()
    page.select_option("#id_interval", "3600")
    page.fill("#id_emails", "ops@example.com\noncall@example.com")
    page.fill("#id_chat_url", "https://hooks.example.com/services/T000/B000/XXXX")
    page.get_by_role("button", name="Save digest settings").click()
    expect(page.locator(".messages")).to_contain_text("Digest settings saved.")
    expect(page.locator("#digest-status")).to_contain_text("Hourly")
    page.screenshot(path=str(ARTIFACTS / "notify_digest.png"), full_page=True)
    # On a phone the navigation wraps; the toggle stays a button of its own.
    page.set_viewport_size({"width": 390, "height": 844})
    expect(page.locator("#notify-toggle")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "notify_phone.png"))
    page.check_policy("digest settings")
