"""The sessions list in a browser: the status filter and the full-text search swap the results
in place (htmx) and keep the filters in the address, so a reload or a shared link shows the
same sessions."""

import re

import pytest
from playwright.sync_api import expect

from core.actors import Actor
from sessions_app.services.lifecycle import close_session, pause_session
from tests.browser.conftest import sign_in
from tests.dashboard.conftest import Team, append, message, team  # noqa: F401
from tests.factories import make_session

pytestmark = pytest.mark.django_db(transaction=True)

OPS = Actor.system("tests")


@pytest.fixture
def sessions(team: Team):
    refund = make_session(team.project, agent="triage", title="Refund for order 4411")
    append(refund, message("Where is my refund? It has been two weeks."))
    parcel = make_session(team.project, agent="shipping", title="Parcel stuck")
    append(parcel, message("The parcel is stuck in customs."))
    pause_session(parcel, actor=OPS, reason="needs a human")
    invoice = make_session(team.project, agent="billing", title="Invoice copy")
    append(invoice, message("Please send a copy of the refund invoice."))
    close_session(invoice, actor=OPS, reason="done")
    # Another project's session matches the search too, and must never be listed.
    other = make_session(team.other_project, title="Elsewhere refund")
    append(other, message("refund elsewhere"))
    return {"refund": refund, "parcel": parcel, "invoice": invoice}


def titles(page) -> list[str]:
    return page.locator("#session-rows tr.session-row td:first-child > a").all_inner_texts()


def test_it_filters_by_status_and_searches_the_text_keeping_both_in_the_url(
    team: Team, sessions, live_url, page, screenshot
):
    list_url = f"{live_url}/p/{team.project.pk}/sessions/"
    sign_in(page, live_url, team.viewer.username)
    page.goto(list_url)
    rows = page.locator("#session-rows tr.session-row")
    expect(rows).to_have_count(3)
    assert titles(page) == ["Invoice copy", "Parcel stuck", "Refund for order 4411"]
    screenshot("sessions-list")
    page.evaluate("window.__sameDocument = true")

    # Status: ticking a box swaps the results and pushes the filter into the address.
    page.get_by_label("Paused").check()
    expect(page).to_have_url(re.compile(r"[?&]status=paused(&|$)"))
    expect(rows).to_have_count(1)
    assert titles(page) == ["Parcel stuck"]

    # Full-text search over the events' text, combined with the status filter.
    page.get_by_label("Paused").uncheck()
    expect(rows).to_have_count(3)
    page.get_by_label("Search events").fill("refund")
    page.get_by_label("Search events").press("Enter")
    expect(page).to_have_url(re.compile(r"[?&]q=refund(&|$)"))
    expect(rows).to_have_count(2)
    assert titles(page) == ["Invoice copy", "Refund for order 4411"]
    page.get_by_label("Closed").check()
    expect(page).to_have_url(re.compile(r"q=refund.*status=closed|status=closed.*q=refund"))
    expect(rows).to_have_count(1)
    assert titles(page) == ["Invoice copy"]
    # All of that happened without leaving the page.
    assert page.evaluate("window.__sameDocument") is True

    # The address alone reproduces the view: a reload shows the same rows and filled filters.
    page.reload()
    expect(rows).to_have_count(1)
    assert titles(page) == ["Invoice copy"]
    expect(page.get_by_label("Search events")).to_have_value("refund")
    expect(page.get_by_label("Closed")).to_be_checked()
    expect(page.get_by_label("Paused")).not_to_be_checked()

    # A search nothing matches says so and offers a way back.
    page.goto(f"{list_url}?q=nothing-matches-this")
    expect(rows).to_have_count(0)
    expect(page.locator("#session-rows .empty")).to_contain_text(
        "No session matches these filters."
    )
    page.get_by_role("link", name="Clear the filters").click()
    expect(page).to_have_url(list_url)
    expect(rows).to_have_count(3)


def test_recently_active_moves_a_written_session_to_the_top_without_losing_rows(
    team: Team, sessions, live_url, page, screenshot
):
    """Issue 13, defect 1: on "recently active" a session that is written to moves to the top;
    it must not vanish (the frame once held a <tr> and a <tbody>, which the HTML parser cannot
    keep in one fragment: the moved rows found no target, htmx:oobErrorNoTarget)."""
    extra = []
    for n in (1, 2):
        moving = make_session(team.project, agent="triage", title=f"Moves {n}")
        append(moving, message("Hello."))
        extra.append(moving)
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if "oobError" in msg.text else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    sign_in(page, live_url, team.viewer.username)
    page.goto(f"{live_url}/p/{team.project.pk}/sessions/?sort=-updated")
    rows = page.locator("#session-rows tr.session-row")
    expect(rows).to_have_count(5)
    expect(page.locator(".live-dot.on")).to_be_attached()
    page.evaluate(
        "document.body.addEventListener('htmx:oobErrorNoTarget',"
        " e => console.log('oobErrorNoTarget ' + e.detail.target))"
    )
    refund, first, second = sessions["refund"], extra[0], extra[1]
    assert titles(page)[-1] == refund.title  # the least recently active
    for moved in (refund, first, refund, second):
        append(moved, message("One more line."))
        expect(rows.first).to_contain_text(moved.title)
        expect(rows).to_have_count(5)
    page.wait_for_timeout(500)
    expect(rows).to_have_count(5)
    assert sorted(titles(page)) == sorted(
        [s.title for s in sessions.values()] + ["Moves 1", "Moves 2"]
    )
    screenshot("walk-sessions-recently-active")
    assert errors == []
