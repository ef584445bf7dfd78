"""The session page in a browser: the event log and the right-hand pane (linked task, facts,
state inspector) side by side; time travel; the actions each role gets, and that they work."""

import re

import pytest
from playwright.sync_api import expect

from core.actors import Actor
from sessions_app.models import Session
from tasks_app.services.transitions import transition_task
from tests.browser.conftest import sign_in
from tests.dashboard.conftest import Team, append, fact, message, session, team  # noqa: F401
from tests.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def linked(team: Team, session: Session):
    task = make_task(
        team.project, params={"document": "Refund policy"}, session_ids=[str(session.pk)]
    )
    transition_task(task, "sent_for_review", actor=Actor.system("agent"))
    return task


def open_session(page, live_url: str, session: Session) -> None:
    page.goto(f"{live_url}/sessions/{session.pk}/")
    expect(page.locator("#event-log article.event").first).to_be_visible()


def test_it_shows_the_log_beside_the_task_facts_and_state(
    team: Team, session, linked, live_url, page, screenshot
):
    sign_in(page, live_url, team.viewer.username)
    open_session(page, live_url, session)
    expect(page.get_by_role("heading", name="Refund for order 4411")).to_be_visible()

    left, right = page.locator(".split > .pane").all()
    # Left: the event log, newest first.
    events = left.locator("#event-log article.event")
    expect(events).to_have_count(6)
    assert events.evaluate_all("rows => rows.map(r => r.id)") == [
        f"event-{seq}" for seq in (6, 5, 4, 3, 2, 1)
    ]
    expect(left.locator("#event-1 .event-text")).to_have_text("Where is my refund?")
    expect(left.locator("#event-3")).to_contain_text("durable")
    # Right: the linked task's diagram (current state marked), the facts, the state at head.
    panel = right.locator(f"#task-slot-{linked.pk} .task-panel")
    expect(panel.locator("g.node.current")).to_have_attribute("data-state", "sent_for_review")
    expect(panel.locator("g.node")).to_have_count(6)
    expect(right.locator("#facts-panel dl.facts")).to_contain_text("customer_tier")
    expect(right.locator("#facts-panel dl.facts dd")).to_contain_text("gold")
    expect(right.locator("#inspector")).to_contain_text("As of seq 6")
    expect(right.locator("#inspector pre.json")).to_contain_text('"stage": "waiting"')
    # Side by side, not stacked: the right pane starts where the left one ends.
    left_box, right_box = left.bounding_box(), right.bounding_box()
    assert left_box["x"] + left_box["width"] <= right_box["x"]
    assert abs(left_box["y"] - right_box["y"]) < 2
    screenshot("session-page")


def test_it_time_travels_to_an_earlier_seq(team: Team, session, live_url, page):
    sign_in(page, live_url, team.viewer.username)
    open_session(page, live_url, session)
    inspector = page.locator("#inspector")
    expect(inspector.locator("pre.json")).to_contain_text('"stage": "waiting"')
    expect(page.locator("#at-seq-range")).to_have_value("6")

    travel = page.locator("#time-travel")
    page.fill("#at-seq-number", "2")
    expect(page.locator("#at-seq-range")).to_have_value("2")  # the two inputs follow each other
    travel.get_by_role("button", name="Show").click()
    expect(inspector).to_contain_text("As of seq 2")
    expect(inspector.locator("pre.json")).to_contain_text('"stage": "triage"')
    expect(inspector.locator("pre.json")).not_to_contain_text("waiting")
    expect(inspector).to_contain_text("No facts yet")  # the fact arrives at seq 3

    page.fill("#at-seq-number", "3")
    travel.get_by_role("button", name="Show").click()
    expect(inspector).to_contain_text("As of seq 3")
    expect(inspector.locator("dl.facts")).to_contain_text("customer_tier")

    page.fill("#at-seq-number", "0")
    travel.get_by_role("button", name="Show").click()
    expect(inspector).to_contain_text("As of seq 0")
    expect(inspector).to_contain_text("No working state at this seq.")
    # The head's facts panel and the log did not move.
    expect(page.locator("#facts-panel")).to_contain_text("at seq 6")
    expect(page.locator("#event-log article.event")).to_have_count(6)


ACTION_BUTTONS = ["Pause", "Resume", "Close", re.compile(r"^Fork at seq \d+$")]


def test_a_viewer_sees_no_operator_actions(team: Team, session, live_url, page):
    sign_in(page, live_url, team.viewer.username)
    open_session(page, live_url, session)
    actions = page.locator("#session-actions")
    expect(actions.get_by_role("link", name="Export JSON Lines")).to_be_visible()
    for name in ACTION_BUTTONS:
        expect(page.get_by_role("button", name=name)).to_have_count(0)
    expect(
        page.locator("form#pause-form, form#resume-form, form#close-form, form.fork-form")
    ).to_have_count(0)
    expect(page.locator(".role-badge")).to_have_text("viewer")


def test_an_operator_pauses_resumes_forks_and_closes(team: Team, session, live_url, page):
    sign_in(page, live_url, team.operator.username)
    open_session(page, live_url, session)
    header_status = page.locator("#session-header .status")
    expect(header_status).to_have_text("Open")
    expect(page.get_by_role("button", name="Pause")).to_be_visible()
    expect(page.get_by_role("button", name="Close")).to_be_visible()
    expect(page.get_by_role("button", name="Fork at seq 6")).to_be_visible()
    expect(page.get_by_role("button", name="Resume")).to_have_count(0)

    page.fill("#pause-reason", "a human takes over")
    page.get_by_role("button", name="Pause").click()
    expect(page.locator("#action-result")).to_contain_text("Session paused.")
    expect(header_status).to_have_text("Paused")
    expect(page.get_by_role("button", name="Pause")).to_have_count(0)
    expect(page.locator("#timeline")).to_contain_text("a human takes over")
    session.refresh_from_db()
    assert session.status == "paused"

    page.get_by_role("button", name="Resume").click()
    expect(header_status).to_have_text("Resumed")
    session.refresh_from_db()
    assert session.status == "resumed"

    # Fork at an earlier seq: time travel there, fork, and land on the fork's page.
    page.fill("#at-seq-number", "3")
    page.locator("#time-travel").get_by_role("button", name="Show").click()
    expect(page.locator("#inspector")).to_contain_text("As of seq 3")  # the form is swapped
    page.fill("#fork-title", "Second try")
    page.get_by_role("button", name="Fork at seq 3").click()
    expect(page.get_by_role("heading", name="Second try")).to_be_visible()
    fork = Session.objects.get(parent=session)
    assert fork.fork_seq == 3
    expect(page).to_have_url(f"{live_url}/sessions/{fork.pk}/")
    expect(page.locator(".messages")).to_contain_text("Forked at seq 3. This is the fork.")
    expect(page.locator("#event-log article.event")).to_have_count(3)  # the parent's prefix

    # Close the parent; the confirmation dialog is accepted.
    open_session(page, live_url, session)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Close").click()
    expect(header_status).to_have_text("Closed")
    expect(page.get_by_role("button", name="Pause")).to_have_count(0)
    expect(page.get_by_role("button", name="Close")).to_have_count(0)
    session.refresh_from_db()
    assert session.status == "closed"


def test_the_kinds_filter_has_one_checkbox_per_kind_and_filters_the_log(
    team: Team, session, live_url, page, screenshot
):
    """Issue 13, defect 2: each kind once, as a checkbox; ticking one filters the log."""
    sign_in(page, live_url, team.viewer.username)
    open_session(page, live_url, session)
    page.locator(".kind-picker > summary").click()
    boxes = page.locator(".kind-picker input[type=checkbox][name=kind]")
    expect(boxes).to_have_count(10)
    labels = page.locator(".kind-picker label.check").all_inner_texts()
    assert [label.strip() for label in labels][:2] == ["Message", "Tool Call"]
    assert len(labels) == len(set(labels)) == 10
    screenshot("walk-kinds-filter")
    page.get_by_label("State", exact=True).check()
    expect(page).to_have_url(re.compile(r"[?&]kind=state(&|$)"))
    events = page.locator("#event-log article.event")
    expect(events).to_have_count(2)
    expect(page.locator("#event-log article.event-state")).to_have_count(2)


def test_every_count_on_the_page_follows_the_live_log(
    team: Team, session, live_url, page, screenshot
):
    """Issue 13, defect 3: the log's "N in total", the header, the time-travel and jump inputs'
    maximum and the facts panel's "at seq" follow the log, after an operator's own actions and
    after an agent's appends alike."""
    sign_in(page, live_url, team.operator.username)
    open_session(page, live_url, session)
    expect(page.locator(".live-dot.on")).to_be_attached()

    def expect_head(head: int) -> None:
        expect(page.locator("#session-header")).to_have_attribute("data-head-seq", str(head))
        expect(page.locator("#log-total")).to_have_text(str(head))
        expect(page.locator("#facts-seq")).to_have_text(str(head))
        expect(page.locator("#at-seq-range")).to_have_attribute("max", str(head))
        expect(page.locator("#at-seq-number")).to_have_attribute("max", str(head))
        expect(page.locator("#id_seq")).to_have_attribute("max", str(head))
        expect(page.locator("#event-log article.event")).to_have_count(head)

    expect_head(6)
    page.fill("#pause-reason", "a look")
    page.get_by_role("button", name="Pause").click()
    expect(page.locator("#session-header .status")).to_have_text("Paused")
    page.get_by_role("button", name="Resume").click()
    expect(page.locator("#session-header .status")).to_have_text("Resumed")
    session.refresh_from_db()
    after_actions = session.head_seq
    assert after_actions > 6
    expect_head(after_actions)
    append(session, message("Back to it."), fact("refund_status", "approved"))
    expect_head(after_actions + 2)
    expect(page.locator("#facts-panel")).to_contain_text("refund_status")
    screenshot("walk-counts-follow-live")
