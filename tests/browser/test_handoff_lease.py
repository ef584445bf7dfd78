"""The workspace's lease, its two ways out, and the navigation's live count (issue 26, §2).

A project whose lease is a few seconds (set on the row: the settings page allows no less than a
minute, and the page derives its renewal from whatever the server says) shows, in a real
browser on a real uvicorn: the claim kept past the lease's length while the page is open; the
claim lost at once when renewals stop getting through, with a Claim button and the typed answer
kept through the re-claim and sent; a colleague's claim after the lapse shown live, the draft
coming back once the handoff is claimable and claimed again; "Hand back to the agent" and
"Release the claim" asking what each does, and doing it; the navigation's count following the
queue on a page that is not the queue's.
"""

import re
import time

import pytest
from playwright.sync_api import expect

from core.models import Role
from handoffs_app.models import Handoff, HandoffSettings
from sessions_app.models import Session
from tests.browser.conftest import ARTIFACTS, sign_in
from tests.browser.test_handoff_loop import Agent
from tests.dashboard.conftest import Team, append, message, team  # noqa: F401
from tests.factories import make_api_key, make_member, make_session

pytestmark = pytest.mark.django_db(transaction=True)

LEASE_SECONDS = 6  # renewed every 2 s
LIVE_MS = 5_000
QUESTION = {"question": "May I refund order A-1001 in full?"}


def shoot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"\nscreenshot: {path}")


def ask(team: Team, live_url: str, payload: dict = QUESTION, kind: str = "question") -> str:
    session = make_session(team.project, agent="refunds", title="Refund for order A-1001")
    append(session, message("My parcel came two weeks late. I want a refund."))
    _, raw_key = make_api_key(team.project)
    return Agent(live_url, raw_key).ask(session.pk, kind, payload, "Refund in full?")["id"]


def lease_left(handoff_id: str) -> float:
    handoff = Handoff.objects.get(pk=handoff_id)
    assert handoff.lease_expires_at is not None
    from django.utils import timezone

    return (handoff.lease_expires_at - timezone.now()).total_seconds()


def test_the_claim_outlives_the_lease_then_a_lost_one_shows_at_once_and_keeps_the_answer(
    team: Team, live_url, page
):
    HandoffSettings.objects.create(project=team.project, lease_seconds=LEASE_SECONDS)
    handoff_id = ask(team, live_url)
    sign_in(page, live_url, team.operator.username)
    page.goto(f"{live_url}/handoffs/{handoff_id}/")
    page.click("#claim-button")
    expect(page.locator(".you-hold")).to_be_visible()
    answer = "Yes: refund the full 120 EUR, the delay was ours."
    page.fill("#respond-text", answer)

    # 1. Renewed inside the lease: held past twice its length with the page open.
    renewals: list[str] = []
    page.on("response", lambda r: renewals.append(r.url) if r.url.endswith("/renew/") else None)
    page.wait_for_timeout(LEASE_SECONDS * 2 * 1000)
    expect(page.locator(".you-hold")).to_be_visible()
    expect(page.locator("[data-lease-lost]")).to_be_hidden()
    assert lease_left(handoff_id) > 0, "the lease lapsed with the page open"
    assert len(renewals) >= 4, renewals  # every third of the lease
    shoot(page, "handoff-lease-renewed")

    # 2. Renewals stop getting through: once the lease's time is up the page says the claim is
    # lost, offers Claim, and the answer is still in its field.
    page.route("**/renew/", lambda route: route.abort())
    blocked = time.monotonic()
    lost = page.locator("[data-lease-lost]")
    expect(lost).to_be_visible(timeout=(LEASE_SECONDS + 2) * 1000)
    print(f"claim shown lost {time.monotonic() - blocked:.1f} s after renewals were blocked")
    expect(lost).to_contain_text("Your claim has lapsed")
    expect(page.locator(".you-hold")).to_be_hidden()
    expect(page.locator("#hand-back-button")).to_be_hidden()  # the holder's actions are gone
    expect(page.locator("#reclaim-button")).to_be_visible()
    expect(page.locator("#respond-text")).to_have_value(answer)
    assert lease_left(handoff_id) <= 0
    shoot(page, "handoff-lease-lost")

    # 3. A send now is refused, says why, offers Claim, and keeps the answer.
    page.unroute("**/renew/")
    page.click("#send-answer-button")
    expect(page.locator("#action-refused")).to_contain_text("Nothing was sent")
    expect(page.locator("#claim-button")).to_be_visible()
    expect(page.locator("#respond-text")).to_have_value(answer)
    shoot(page, "handoff-lease-refused-send")

    # 4. Claimed again: the same answer is there, and goes.
    page.click("#claim-button")
    expect(page.locator(".you-hold")).to_be_visible()
    expect(page.locator("#hand-back-button")).to_be_visible()
    expect(page.locator("#respond-text")).to_have_value(answer)
    page.click("#send-answer-button")
    expect(page.locator("#handoff-status")).to_have_text("Answered")
    assert Handoff.objects.get(pk=handoff_id).answer["text"] == answer


def test_a_colleagues_claim_after_the_lapse_shows_live_and_the_draft_comes_back(
    team: Team, live_url, page, browser
):
    HandoffSettings.objects.create(project=team.project, lease_seconds=LEASE_SECONDS)
    bob = make_member(team.project, Role.OPERATOR, "bob")
    handoff_id = ask(team, live_url)
    workspace = f"{live_url}/handoffs/{handoff_id}/"
    sign_in(page, live_url, team.operator.username)
    page.goto(workspace)
    page.click("#claim-button")
    expect(page.locator(".you-hold")).to_be_visible()
    answer = "Refund it, and apologise for the delay."
    page.fill("#respond-text", answer)
    page.route("**/renew/", lambda route: route.abort())
    expect(page.locator("[data-lease-lost]")).to_be_visible(timeout=(LEASE_SECONDS + 2) * 1000)

    context_b = browser.new_context()
    page_b = context_b.new_page()
    try:
        sign_in(page_b, live_url, bob.username)
        page_b.goto(workspace)
        page_b.click("#claim-button")  # alice's lease lapsed: bob's claim wins at once
        expect(page_b.locator(".you-hold")).to_be_visible()
        expect(page.locator(".held-by-other")).to_contain_text("bob", timeout=LIVE_MS)
        expect(page.locator("#respond-text")).to_have_count(0)
        page_b.once("dialog", lambda dialog: dialog.accept())
        page_b.click("#release-button")
        expect(page_b.locator("#claim-button")).to_be_visible()
    finally:
        context_b.close()
    # Back in the queue: alice sees Claim live, claims, and finds her answer where she left it.
    page.unroute("**/renew/")
    expect(page.locator("#claim-button")).to_be_visible(timeout=LIVE_MS)
    page.click("#claim-button")
    expect(page.locator(".you-hold")).to_be_visible()
    expect(page.locator("#respond-text")).to_have_value(answer)


def test_hand_back_and_release_say_what_they_do_and_do_it(team: Team, live_url, page):
    handoff_id = ask(team, live_url, payload={}, kind="takeover")
    session_id = Handoff.objects.get(pk=handoff_id).session_id
    sign_in(page, live_url, team.operator.username)
    page.goto(f"{live_url}/handoffs/{handoff_id}/")
    page.click("#claim-button")
    page.click("#take-over-button")
    expect(page.locator("#human-message")).to_be_visible()
    expect(page.locator("#hand-back-button")).to_have_text("Hand back to the agent")
    expect(page.locator("#release-button")).to_have_text("Release the claim")

    # Release, declined: nothing happens. Accepted: the claim and the take-over end, as asked.
    questions: list[str] = []

    def answer(dialog, accept: bool) -> None:
        questions.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda d: answer(d, False))
    page.click("#release-button")
    page.wait_for_timeout(500)
    assert "the agent may write in the session again" in questions[-1]
    assert Handoff.objects.get(pk=handoff_id).status == "taken_over"
    shoot(page, "handoff-takeover-actions")
    page.once("dialog", lambda d: answer(d, True))
    page.click("#release-button")
    expect(page.locator("#claim-button")).to_be_visible()
    assert Handoff.objects.get(pk=handoff_id).status == "open"
    assert Session.objects.get(pk=session_id).taken_over_by == ""

    # Hand back: asked, then the session resumes for the agent and the handoff ends.
    page.click("#claim-button")
    page.once("dialog", lambda d: answer(d, True))
    page.click("#hand-back-button")
    expect(page.locator("#handoff-status")).to_have_text("Handed back")
    assert re.search(r"Hand the session back to the agent\? The session resumes", questions[-1])
    assert Session.objects.get(pk=session_id).status == "resumed"


def test_the_navigation_count_is_live_on_a_page_that_is_not_the_queue(team: Team, live_url, page):
    sign_in(page, live_url, team.operator.username)
    page.goto(f"{live_url}/p/{team.project.pk}/sessions/")
    count = page.locator("#nav-handoff-count")
    expect(count).to_have_text("0")
    expect(page.locator("[data-live-nav]")).to_be_attached()
    page.wait_for_timeout(500)
    ask(team, live_url)
    expect(count).to_have_text("1", timeout=LIVE_MS)
    ask(team, live_url)
    expect(count).to_have_text("2", timeout=LIVE_MS)
