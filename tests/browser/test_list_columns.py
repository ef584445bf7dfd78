"""What operators asked for in issue 13, in a browser: the sessions list's budget bar and linked
task state (kept right by live row updates), search snippets (escaped, matches marked), and
the overview's waiting and stuck tasks next to the waiting sessions, live."""

import pytest
from playwright.sync_api import expect

from core.actors import Actor
from sessions_app.services.lifecycle import pause_session
from tasks_app.services.steps import update_step
from tasks_app.services.transitions import transition_task
from tests.browser.conftest import sign_in
from tests.dashboard.conftest import Team, append, message, team  # noqa: F401
from tests.factories import make_session, make_task

pytestmark = pytest.mark.django_db(transaction=True)

OPS = Actor.system("tests")


def test_the_budget_bar_and_the_task_state_follow_live_row_updates(
    team: Team, live_url, page, screenshot
):
    budgeted = make_session(team.project, title="Budgeted run", budget_max_tokens=1000)
    append(budgeted, message("Starting.", tokens=300))
    make_session(team.project, title="No budget")
    task = make_task(team.project, session_ids=[str(budgeted.pk)])
    make_task(team.project, workflow="research_report", session_ids=[str(budgeted.pk)])
    sign_in(page, live_url, team.viewer.username)
    page.goto(f"{live_url}/p/{team.project.pk}/sessions/")
    expect(page.locator(".live-dot.on")).to_be_attached()

    row = page.locator(f"#session-row-{budgeted.pk}")
    bar = row.locator(".budget-bar")
    expect(bar).to_have_attribute("class", "budget-bar")
    expect(bar.locator("span")).to_have_class("pct-30")
    expect(row.locator(".budget-pct")).to_have_text("30%")
    # The first linked task's state in words, and how many more tasks there are.
    expect(row.locator(".task-cell a.task-state")).to_have_text("draft created")
    expect(row.locator(".task-cell")).to_contain_text("+1")
    expect(page.locator(".session-row", has_text="No budget").locator(".budget-bar")).to_have_count(
        0
    )

    # An append near the limit: amber, without a reload.
    append(budgeted, message("More work.", tokens=560))
    expect(bar).to_have_class("budget-bar near")
    expect(row.locator(".budget-pct")).to_have_text("86%")
    # The task moves on: the row says where it is now.
    transition_task(task, transition="submit", actor=OPS)
    expect(row.locator(".task-cell a.task-state")).to_have_text("sent for review")
    # Past the limit: red, and said in words.
    append(budgeted, message("Even more.", tokens=400))
    expect(bar).to_have_class("budget-bar over")
    expect(row.locator(".budget-pct")).to_have_text("126% · exceeded")
    expect(row.locator(".budget-bar > span")).to_have_class("pct-100")
    # Still one row per session: the updates replaced rows in place.
    expect(page.locator("tr.session-row")).to_have_count(2)
    screenshot("sessions-list-budget-and-task")


def test_search_results_show_the_matching_text_escaped_with_the_words_marked(
    team: Team, live_url, page, screenshot
):
    hostile = make_session(team.project, title="Hostile text")
    append(
        hostile,
        message("Nothing here."),
        message('Try <img src=x onerror="window.__xss=1"> and <i>refund</i> now & then'),
    )
    plain = make_session(team.project, title="Plain refund")
    append(plain, message("Where is my refund? It has been two weeks."))
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    sign_in(page, live_url, team.viewer.username)
    page.goto(f"{live_url}/p/{team.project.pk}/sessions/")
    page.get_by_label("Search events").fill("<b>refund</b>")
    page.get_by_label("Search events").press("Enter")
    expect(page.locator("tr.session-row")).to_have_count(2)

    snippet = page.locator(f"#session-row-{plain.pk} .search-snippet")
    expect(snippet).to_have_text("Where is my refund? It has been two weeks.")
    expect(snippet.locator("mark")).to_have_text(["refund"])
    hostile_snippet = page.locator(f"#session-row-{hostile.pk} .search-snippet")
    expect(hostile_snippet.locator("mark")).to_have_text(["refund"])
    # Markup in the event's text never became elements: no <img>, no handler ran.
    expect(page.locator(".search-snippet img, .search-snippet i, .search-snippet b")).to_have_count(
        0
    )
    expect(hostile_snippet).to_contain_text("now & then")
    assert page.evaluate("window.__xss") is None
    assert dialogs == []
    # The query as typed stays in the box, as text.
    expect(page.get_by_label("Search events")).to_have_value("<b>refund</b>")
    screenshot("sessions-list-search-snippets")


def test_the_overview_lists_waiting_and_stuck_tasks_next_to_the_waiting_sessions_live(
    team: Team, live_url, page, screenshot
):
    paused = make_session(team.project, title="Needs a person")
    pause_session(paused, actor=OPS, reason="approval needed")
    waits = make_task(team.project, external_id="contract-review")
    stuck = make_task(team.project, workflow="research_report", external_id="market-scan")
    sign_in(page, live_url, team.viewer.username)
    page.goto(f"{live_url}/p/{team.project.pk}/")
    expect(page.locator(".live-dot.on")).to_be_attached()
    card = page.locator("#tasks-attention")
    expect(card).to_contain_text("No task is waiting or stuck.")
    # Beside the waiting sessions (same row of the grid) at desktop width.
    waiting_box = page.locator("#waiting").bounding_box()
    card_box = card.bounding_box()
    assert waiting_box and card_box and abs(waiting_box["y"] - card_box["y"]) < 2
    assert card_box["x"] > waiting_box["x"] + waiting_box["width"] - 1

    update_step(waits, "review", status="waiting", actor=OPS, waiting_on="review_decision")
    expect(card.locator(".waiting-tasks tbody tr")).to_have_count(1)
    expect(card.locator(".waiting-tasks")).to_contain_text("contract-review")
    expect(card.locator(".waiting-tasks")).to_contain_text("review_decision")
    for _ in range(3):
        update_step(stuck, "research", status="running", actor=OPS)
        update_step(
            stuck,
            "research",
            status="failed",
            actor=OPS,
            error={"type": "source_unavailable", "message": "paywall"},
        )
    expect(card.locator(".stuck-tasks tbody tr")).to_have_count(1)
    expect(card.locator(".stuck-tasks")).to_contain_text("failed after 3 attempts")
    expect(card.locator(".attention-counts")).to_contain_text("1 waiting on a signal")
    expect(card.locator(".attention-counts")).to_contain_text("1 stuck")
    # The waiting sessions are still there, beside it.
    expect(page.locator("#waiting")).to_contain_text("Needs a person")
    screenshot("overview-tasks-waiting-and-stuck")
