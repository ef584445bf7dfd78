"""The strict Content-Security-Policy breaks nothing: the main pages load, htmx swaps, the
project switcher, the websocket's live updates and the API docs (Swagger UI) all work, and the
browser reports no violation of the policy and no Permissions-Policy error."""

import re

import httpx
import pytest
from playwright.sync_api import expect

from core.models import Role
from core.services.projects import add_member
from tests.browser.conftest import sign_in
from tests.dashboard.conftest import Team, append, message, team  # noqa: F401
from tests.factories import make_api_key, make_member, make_session, make_task

pytestmark = pytest.mark.django_db(transaction=True)

# Recorded in the page before any of its scripts run (init scripts are not subject to the CSP).
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__cspViolations.push(e.violatedDirective + " blocked " + (e.blockedURI || "inline")
    + " (" + (e.sourceFile || "") + ":" + e.lineNumber + ")");
});
"""


@pytest.fixture
def watched(page):
    """The page, with every CSP or Permissions-Policy complaint it logs collected."""
    complaints: list[str] = []
    page.on(
        "console",
        lambda msg: (
            complaints.append(msg.text)
            if "Content Security Policy" in msg.text or "Permissions-Policy" in msg.text
            else None
        ),
    )
    page.add_init_script(RECORD_VIOLATIONS)

    def check(where: str) -> None:
        violations = page.evaluate("window.__cspViolations || []")
        assert violations == [] and complaints == [], (where, violations, complaints)

    page.check_policy = check
    return page


def test_the_main_pages_work_under_the_policy_with_no_violation(team: Team, live_url, watched):
    page = watched
    second = make_member(team.other_project, Role.VIEWER)  # a member of two projects
    add_member(team.project, second, Role.VIEWER)
    session = make_session(team.project, agent="triage", title="Refund", budget_max_tokens=1000)
    append(session, message("Where is my refund?", tokens=850))
    make_session(team.project, agent="shipping", title="Parcel stuck")
    task = make_task(team.project)
    _, raw_key = make_api_key(team.project)

    # Sign-in page, then the overview.
    sign_in(page, live_url, second.username)
    page.check_policy("sign-in")
    page.goto(f"{live_url}/p/{team.project.pk}/")
    expect(page.locator("main h1")).to_be_visible()
    page.check_policy("overview")

    # The sessions list: an htmx swap of the results (with its loading indicator).
    page.goto(f"{live_url}/p/{team.project.pk}/sessions/")
    rows = page.locator("#session-rows tr.session-row")
    expect(rows).to_have_count(2)
    page.fill("#id_q", "refund")
    page.press("#id_q", "Enter")
    expect(rows).to_have_count(1)
    expect(page).to_have_url(re.compile(r"/sessions/\?q=refund"))  # pushed by htmx
    page.check_policy("sessions list")

    # The session page: the budget bar is drawn from its class, and the websocket delivers.
    page.goto(f"{live_url}/sessions/{session.pk}/")
    bar = page.locator(".budget-bar > span").first
    expect(bar).to_have_class("pct-85")
    track = page.locator(".budget-bar").first.bounding_box()
    fill = bar.bounding_box()
    assert track and fill and round(fill["width"] / track["width"], 2) == 0.85
    expect(page.locator(".live-dot.on")).to_be_attached()  # the socket is open
    response = httpx.post(
        f"{live_url}/api/v1/sessions/{session.pk}/events",
        json={"events": [{"kind": "message", "role": "assistant", "content": {"text": "Done."}}]},
        headers={"Authorization": f"Bearer {raw_key}"},
        timeout=10,
    )
    assert response.status_code == 201, response.text
    expect(page.locator("#event-2 .event-text")).to_have_text("Done.")
    page.check_policy("session page")

    # The tasks list and a task page.
    page.goto(f"{live_url}/p/{team.project.pk}/tasks/")
    expect(page.locator(f"#task-row-{task.pk}")).to_be_visible()
    page.check_policy("tasks list")
    page.goto(f"{live_url}/tasks/{task.pk}/")
    expect(page.locator("figure.state-diagram svg")).to_be_visible()
    page.check_policy("task page")

    # The project switcher submits on change from switchboard.js (no inline onchange).
    page.select_option("#project-switch", str(team.other_project.pk))
    expect(page).to_have_url(f"{live_url}/p/{team.other_project.pk}/")
    page.check_policy("project switcher")


def test_the_api_docs_render_under_the_policy(live_url, watched):
    page = watched
    page.goto(f"{live_url}/api/v1/docs")
    # The title is drawn once Swagger UI has fetched and parsed the whole schema: on a loaded
    # machine (a CI run at 25 minutes) that took longer than the default 5 s.
    drawn = 30_000
    title = page.locator(".swagger-ui .info .title")
    expect(title).to_contain_text("Switchboard agent API", timeout=drawn)
    expect(page.locator(".opblock").first).to_be_visible()  # the schema was fetched and drawn
    page.locator(".opblock-summary").first.click()  # an operation opens
    expect(page.locator(".opblock-body").first).to_be_visible()
    page.check_policy("API docs")
