"""The session page in a browser: the event log and the right-hand pane (linked task, facts,
state inspector) side by side; time travel; the actions each role gets, and that they work."""

import re

import pytest
from playwright.sync_api import expect

from core.actors import Actor
from sessions_app.models import EventKind, Session
from sessions_app.services.events import EventDraft
from sessions_app.services.lifecycle import pause_session
from tasks_app.services.steps import update_step
from tasks_app.services.transitions import transition_task
from tests.browser.conftest import sign_in
from tests.dashboard.conftest import (  # noqa: F401
    Team,
    append,
    fact,
    message,
    session,
    state,
    team,
)
from tests.factories import make_session, make_task

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
    # The whole page moved with it: the facts panel, and the log greys every event.
    expect(page.locator("#facts-panel")).to_contain_text("at seq 0")
    expect(page.locator("#event-log article.event.later")).to_have_count(6)


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
    expect(boxes).to_have_count(len(EventKind.choices))
    labels = page.locator(".kind-picker label.check").all_inner_texts()
    assert [label.strip() for label in labels][:2] == ["Message", "Tool Call"]
    assert len(labels) == len(set(labels)) == len(EventKind.choices)
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
        # Live, the time-travel slider and seq box stand at the head, and the working state
        # is the head's, not the head of page load (issue 26).
        expect(page.locator("#at-seq-range")).to_have_value(str(head))
        expect(page.locator("#at-seq-number")).to_have_value(str(head))
        expect(page.locator("#inspector")).to_contain_text(f"As of seq {head} (the head")

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
    expect(page.locator("#inspector")).to_contain_text("refund_status")
    screenshot("walk-counts-follow-live")


# --- Time travel for the whole page ---------------------------------------------------------


@pytest.fixture
def story(team: Team):
    """A session whose every part has a past: events with tokens under a budget, a fact that
    changes, a pause, and a linked task that is created, submitted and started along the way.

    seq 1-6 before the task exists; 7 after its creation; the task moves (sent for review,
    draft running); 8 the pause; 9 the fact's new value; 10 a costly message.
    """
    s = make_session(
        team.project, agent="triage", title="Refund for order 4411", budget_max_tokens=1000
    )
    append(
        s,
        message("Where is my refund?", tokens=100),
        state({"stage": "triage"}),
        fact("customer_tier", "gold"),
        message("Looking into it.", role="assistant", tokens=200),
        EventDraft(kind="decision", content={"decision": "escalate", "rationale": "over $500"}),
        state({"stage": "waiting"}),
    )
    task = make_task(team.project, params={"document": "Refund policy"}, session_ids=[str(s.pk)])
    append(s, message("Drafting the refund note.", role="assistant", tokens=100))  # seq 7
    transition_task(task, "sent_for_review", actor=Actor.system("agent"))
    update_step(task, "draft", status="running", actor=Actor.system("agent"))
    s.refresh_from_db()
    pause_session(s, actor=Actor.system("agent"), reason="needs a human")  # seq 8
    append(s, fact("customer_tier", "platinum"), message("Costly answer.", tokens=500))  # 9, 10
    s.refresh_from_db()
    return s, task


def move_slider(page, seq: int) -> None:
    """Drag the time-travel slider to `seq` (its value changes, then it is let go)."""
    page.locator("#at-seq-range").evaluate(
        """(el, seq) => {
            el.value = String(seq);
            el.dispatchEvent(new Event("input", {bubbles: true}));
            el.dispatchEvent(new Event("change", {bubbles: true}));
        }""",
        seq,
    )


def expect_live(page, session: Session, task) -> None:
    expect(page.locator("#moment")).to_have_attribute("data-at", "")
    expect(page.locator("#back-to-live")).to_have_count(0)
    expect(page.locator("#event-log article.event.later")).to_have_count(0)
    expect(page.locator("#header-status")).to_have_text("Paused")
    expect(page.locator("#header-usage")).to_contain_text("900 tokens")
    expect(page.locator("#facts-panel dl.facts dd")).to_contain_text("platinum")
    expect(page.locator("#timeline")).to_contain_text("needs a human")
    panel = page.locator(f"#task-slot-{task.pk} .task-panel")
    expect(panel.locator("g.node.current")).to_have_attribute("data-state", "sent_for_review")
    expect(panel.locator("li.step").first.locator(".status")).to_have_text("Running")
    expect(page.locator("#at-seq-range")).to_have_value(str(session.head_seq))


def test_time_travel_moves_the_whole_page_and_the_url_keeps_the_moment(
    team: Team, story, live_url, page, screenshot
):
    session, task = story
    sign_in(page, live_url, team.viewer.username)
    open_session(page, live_url, session)
    expect_live(page, session, task)

    move_slider(page, 7)
    expect(page).to_have_url(re.compile(r"\?at=7$"))
    moment = page.locator("#moment")
    expect(moment).to_have_attribute("data-at", "7")
    expect(moment).to_contain_text("Showing seq 7 of 10")
    # The log: the moment's row marked, every later row greyed, the earlier ones not.
    expect(page.locator("#event-7")).to_have_class(re.compile(r"\bmoment\b"))
    for seq in (8, 9, 10):
        expect(page.locator(f"#event-{seq}")).to_have_class(re.compile(r"\blater\b"))
    later_opacity = page.locator("#event-9").evaluate("el => getComputedStyle(el).opacity")
    assert float(later_opacity) < 0.6
    for seq in range(1, 7):
        expect(page.locator(f"#event-{seq}")).not_to_have_class(re.compile(r"\blater\b"))
    # The header: status, usage and budget then.
    expect(page.locator("#header-status")).to_have_text("Open")
    expect(page.locator("#session-header")).to_contain_text("now paused")
    expect(page.locator("#header-usage")).to_contain_text("400 tokens")
    expect(page.locator("#session-header [role=meter]")).to_have_attribute("aria-valuenow", "40")
    # The facts and the working state then; the timeline up to it.
    expect(page.locator("#facts-panel dl.facts dd")).to_contain_text("gold")
    expect(page.locator("#facts-panel")).not_to_contain_text("platinum")
    expect(page.locator("#facts-seq")).to_have_text("7")
    expect(page.locator("#inspector")).to_contain_text("As of seq 7")
    expect(page.locator("#timeline")).not_to_contain_text("needs a human")
    expect(page.locator("#timeline .timeline-now")).to_contain_text("At seq 7")
    # The task as it was when seq 7 was written: created, not yet submitted, nothing started.
    panel = page.locator(f"#task-slot-{task.pk} .task-panel")
    expect(panel.locator("g.node.current")).to_have_attribute("data-state", "draft_created")
    expect(panel.locator("li.step .status")).to_have_text(["Pending"] * 4)
    expect(page.locator(f"#task-slot-{task.pk}")).to_contain_text("As it was")
    # The log scrolled to the moment: its row is in view.
    expect(page.locator("#event-7")).to_be_in_viewport()
    screenshot("session-past-seq-test")

    # Typing a seq does the same; before the task existed its slot says so.
    page.fill("#at-seq-number", "3")
    page.locator("#time-travel").get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"\?at=3$"))
    expect(page.locator(f"#task-slot-{task.pk}")).to_contain_text("did not exist yet at seq 3")
    expect(page.locator("#at-seq-range")).to_have_value("3")
    expect(page.locator("#header-usage")).to_contain_text("100 tokens")

    # The browser's Back returns to the previous moment.
    page.go_back()
    expect(page).to_have_url(re.compile(r"\?at=7$"))
    expect(page.locator("#moment")).to_have_attribute("data-at", "7")
    expect(page.locator("#at-seq-range")).to_have_value("7")
    expect(page.locator("#facts-panel dl.facts dd")).to_contain_text("gold")

    # The URL is the moment: a colleague opening it sees the same, rendered by the server.
    colleague = page.context.new_page()
    colleague.goto(f"{live_url}/sessions/{session.pk}/?at=7")
    expect(colleague.locator("#moment")).to_contain_text("Showing seq 7 of 10")
    expect(colleague.locator("#event-8")).to_have_class(re.compile(r"\blater\b"))
    expect(colleague.locator("#facts-panel dl.facts dd")).to_contain_text("gold")
    expect(colleague.locator("#at-seq-range")).to_have_value("7")
    expect(colleague.locator(f"#task-slot-{task.pk} g.node.current")).to_have_attribute(
        "data-state", "draft_created"
    )
    colleague.close()

    # Back to live.
    page.get_by_role("link", name="Back to live").click()
    expect(page).to_have_url(f"{live_url}/sessions/{session.pk}/")
    expect_live(page, session, task)


def test_live_updates_do_not_yank_a_past_view_back(team: Team, story, live_url, page):
    session, task = story
    sign_in(page, live_url, team.viewer.username)
    page.goto(f"{live_url}/sessions/{session.pk}/?at=7")
    expect(page.locator(".live-dot.on")).to_be_attached()
    append(session, fact("customer_tier", "diamond"), message("Even newer."))
    # The counts and the slider's reach follow the head...
    expect(page.locator("#log-total")).to_have_text("12")
    expect(page.locator("#at-seq-range")).to_have_attribute("max", "12")
    expect(page.locator("#session-header")).to_have_attribute("data-head-seq", "12")
    expect(page.locator("#moment")).to_contain_text("Showing seq 7 of 12")
    # ...the past does not move.
    expect(page.locator("#event-11")).to_have_count(0)
    expect(page.locator("#header-status")).to_have_text("Open")
    expect(page.locator("#facts-panel dl.facts dd")).to_contain_text("gold")
    expect(page.locator("#facts-seq")).to_have_text("7")
    expect(page.locator("#at-seq-range")).to_have_value("7")
    # Back to live shows what arrived meanwhile.
    page.get_by_role("link", name="Back to live").click()
    expect(page.locator("#event-12")).to_be_visible()
    expect(page.locator("#facts-panel dl.facts dd")).to_contain_text("diamond")


@pytest.mark.parametrize("value", ["abc", "-4", "999"])
def test_a_bad_seq_in_the_url_gets_a_friendly_page(team: Team, session, live_url, page, value):
    sign_in(page, live_url, team.viewer.username)
    response = page.goto(f"{live_url}/sessions/{session.pk}/?at={value}")
    assert response.status == 400
    expect(page.locator("#moment .inline-error")).to_contain_text("Cannot show seq")
    expect(page.locator("#moment")).to_contain_text("Showing the live session.")
    expect(page.locator("#event-log article.event")).to_have_count(6)


def test_the_right_pane_stays_in_view_while_the_log_scrolls(team: Team, session, live_url, page):
    append(session, *[message(f"message {i}") for i in range(44)])  # 50 rows: a long log
    sign_in(page, live_url, team.viewer.username)
    open_session(page, live_url, session)
    side = page.locator(".session-side")
    top = side.bounding_box()["y"]
    # Halfway down the log (at its very end the pane rides up with the bottom of the columns).
    page.locator("#event-25").scroll_into_view_if_needed()
    assert page.evaluate("window.scrollY") > 1000
    box = side.bounding_box()
    assert top > 100 and 0 <= box["y"] <= 20  # stuck to the top of the window
    assert box["y"] + box["height"] <= 900 + 1  # and no taller than it: it scrolls itself
    expect(page.locator("#time-travel")).to_be_in_viewport()
    # No horizontal scroll of the page.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    # At phone width one column: the pane follows the log, in the page's own flow (not stuck).
    page.set_viewport_size({"width": 390, "height": 844})
    page.evaluate("window.scrollTo(0, 0)")
    log_box = page.locator("#event-log").bounding_box()
    side_box = side.bounding_box()
    assert side_box["y"] >= log_box["y"] + log_box["height"]
    assert abs(side_box["x"] - log_box["x"]) < 2
    assert side.evaluate("el => getComputedStyle(el).position") == "static"
    split = page.locator(".session-split")
    assert split.evaluate("el => el.scrollWidth <= el.clientWidth")


def test_a_shared_moment_link_on_a_phone_shows_the_moment_and_back_to_live_together(
    team: Team, session, live_url, page, screenshot
):
    """Issue 26: at 390 px a `?at=` link scrolls to its event; "Showing seq N … Back to live"
    is on screen with it (not ~1,600 px below, after the log), and covers no part of the row."""
    append(session, *[message(f"message {i}") for i in range(44)])  # 50 rows: a long log
    sign_in(page, live_url, team.viewer.username)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_url}/sessions/{session.pk}/?at=20")
    row = page.locator("#event-20")
    expect(row).to_be_in_viewport()
    page.wait_for_timeout(300)  # the scroll to the moment settles
    back = page.locator("#back-to-live")
    expect(back).to_be_in_viewport()
    expect(page.locator("#moment")).to_contain_text("Showing seq 20")
    bar, row_box = page.locator("#moment").bounding_box(), row.bounding_box()
    assert bar["y"] + bar["height"] <= row_box["y"] + 1, (bar, row_box)  # the row is uncovered
    assert bar["width"] <= 390 and page.evaluate(
        "document.documentElement.scrollWidth <= window.innerWidth"
    )
    # What the phone shows (the window, not the whole page).
    page.screenshot(path=str(screenshot("moment-link-390")), full_page=False)
    # At the top of the page the bar hides none of the header.
    page.evaluate("window.scrollTo(0, 0)")
    header = page.locator("#session-header").bounding_box()
    assert header["y"] >= page.locator("#moment").bounding_box()["height"] - 1
    page.screenshot(path=str(screenshot("moment-link-390-top")), full_page=False)
    back.click()
    expect(page.locator("#moment")).to_contain_text("Live: the page follows")
    expect(page.locator("#back-to-live")).to_have_count(0)
    # Wide, the card stays in the side pane, in its place.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_url}/sessions/{session.pk}/?at=20")
    assert page.locator("#moment").evaluate("el => getComputedStyle(el).position") == "static"
    screenshot("moment-link-1280")
