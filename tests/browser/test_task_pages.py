"""The tasks list and a task page in a browser: rows with their state and steps, and the state
diagram with the current state marked; a transition made meanwhile moves the mark live."""

import pytest
from playwright.sync_api import expect

from core.actors import Actor
from tasks_app.services.steps import update_step
from tasks_app.services.transitions import transition_task
from tests.browser.conftest import sign_in
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_session, make_task

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = Actor.system("agent")


def test_the_list_and_the_task_page_show_the_diagram_with_the_current_state(
    team: Team, live_url, page, screenshot
):
    session = make_session(team.project, title="Chat about the policy")
    task = make_task(
        team.project, params={"document": "Refund policy"}, session_ids=[str(session.pk)]
    )
    update_step(task, "draft", status="running", actor=AGENT, agent_name="writer")
    update_step(task, "draft", status="succeeded", actor=AGENT, outputs={"words": 812})
    transition_task(task, "sent_for_review", actor=AGENT, reason="draft ready")
    finished = make_task(team.project, workflow="research_report")

    sign_in(page, live_url, team.viewer.username)
    page.goto(f"{live_url}/p/{team.project.pk}/tasks/")
    rows = page.locator("#task-rows tr.task-row")
    expect(rows).to_have_count(2)
    row = page.locator(f"#task-row-{task.pk}")
    expect(row.locator(".task-state")).to_have_text("sent for review")
    expect(row.locator(".step-pills li").first).to_contain_text("draft")
    expect(page.locator(f"#task-row-{finished.pk}")).to_be_visible()
    screenshot("task-list")

    row.get_by_role("link", name="Document approval").click()
    expect(page).to_have_url(f"{live_url}/tasks/{task.pk}/")
    panel = page.locator("#task-panel")
    diagram = panel.locator("figure.state-diagram svg")
    expect(diagram).to_be_visible()
    expect(diagram.locator("g.node")).to_have_count(6)
    expect(diagram.locator("g.node.current")).to_have_count(1)
    expect(diagram.locator("g.node.current")).to_have_attribute("data-state", "sent_for_review")
    next_states = diagram.locator("g.node.next").evaluate_all(
        "nodes => nodes.map(n => n.dataset.state).sort()"
    )
    assert next_states == ["approved", "changes_requested", "rejected"]
    expect(diagram.locator("desc")).to_have_text(
        # Readable names (issue 13): "sent for review", not "sent_for_review".
        "Current state: sent for review. It can move to: changes requested (request changes), "
        "approved (approve), rejected (reject)."
    )
    expect(panel.locator(".step-succeeded")).to_contain_text("Write the draft")
    expect(page.locator("#task-sessions")).to_contain_text("Chat about the policy")
    expect(page.locator("#task-history")).to_contain_text("draft ready")
    screenshot("task-page")


# The transition is made in this test process and the page is served by another (live_url):
# only a shared channel layer carries the update across.
@pytest.mark.requires_redis("a task page's live update from another process")
def test_a_transition_made_meanwhile_moves_the_mark_without_a_reload(team: Team, live_url, page):
    task = make_task(team.project, params={"document": "Refund policy"})
    update_step(task, "draft", status="running", actor=AGENT, agent_name="writer")
    update_step(task, "draft", status="succeeded", actor=AGENT, outputs={"words": 812})
    transition_task(task, "sent_for_review", actor=AGENT, reason="draft ready")
    sign_in(page, live_url, team.viewer.username)
    page.goto(f"{live_url}/tasks/{task.pk}/")
    diagram = page.locator("#task-panel figure.state-diagram svg")
    expect(diagram.locator("g.node.current")).to_have_attribute("data-state", "sent_for_review")

    expect(page.locator(".live-dot.on")).to_be_attached()
    page.evaluate("window.__sameDocument = true")
    transition_task(task, "approved", actor=AGENT, reason="looks good")
    expect(diagram.locator("g.node.current")).to_have_attribute(
        "data-state", "approved", timeout=5_000
    )
    expect(page.locator("#task-header .task-state")).to_have_text("approved")
    expect(page.locator("#task-history")).to_contain_text("looks good")
    assert page.evaluate("window.__sameDocument") is True


def test_step_statuses_have_distinct_colours_and_icons(live_url, page, screenshot):
    """Issue 13: running is not succeeded; pending, waiting and paused are told apart."""
    statuses = ["pending", "running", "waiting", "paused", "succeeded", "failed", "skipped"]
    spans = "".join(f'<span class="status status-{s}">{s}</span> ' for s in statuses)
    page.set_content(
        f'<link rel="stylesheet" href="{live_url}/static/css/switchboard.css"><p>{spans}</p>'
    )
    page.wait_for_load_state("networkidle")
    looks = page.evaluate(
        """() => [...document.querySelectorAll('.status')].map(el => {
            const s = getComputedStyle(el), b = getComputedStyle(el, '::before');
            return [s.backgroundColor + '/' + s.color, b.content];
        })"""
    )
    colours = [look[0] for look in looks]
    icons = [look[1] for look in looks]
    assert len(set(colours)) == len(statuses), dict(zip(statuses, colours, strict=True))
    assert len(set(icons)) == len(statuses) and "none" not in icons
    screenshot("walk-step-statuses")
