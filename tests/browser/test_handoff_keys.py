"""Keyboard shortcuts of the handoff queue and workspace, and who else is viewing a handoff
(issue 26 §4), in a real chromium against a real uvicorn.

Shortcuts: on the queue j/k (and the arrows) choose a row, o/Enter open it, c claims it; in the
workspace c claims, a approves, r rejects (with the reason box), n goes to the next waiting
handoff; nothing fires while an answer is typed; ? opens the help dialog; a viewer's keys do
nothing the page does not offer. Presence: two people on one workspace each see the other,
live; one person's two tabs count once; a closed page leaves the other's line.
"""

import pytest
from playwright.sync_api import expect

from core.models import Role
from handoffs_app.models import Handoff, HandoffViewer
from tests.browser.conftest import ARTIFACTS, sign_in
from tests.browser.test_content_security_policy import watched  # noqa: F401  (the CSP watch)
from tests.browser.test_handoff_loop import APPROVAL  # accept, edit, respond and reject allowed
from tests.browser.test_live_without_redis import no_redis
from tests.dashboard.conftest import Team, team  # noqa: F401
from tests.factories import make_member, make_session
from tests.handoffs.helpers import ask
from tests.servers import asgi_server

pytestmark = pytest.mark.django_db(transaction=True)

LIVE_MS = 5_000
# Under the consumer's heartbeat (presence.HEARTBEAT_SECONDS, 5 s): a join or a leave is seen
# because it is told at once, not because the other page's next heartbeat read it.
PRESENCE_MS = 3_000


def shoot(page, name: str, full_page: bool = True) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    print(f"\nscreenshot: {path}")


def queue_of(team: Team) -> dict[str, Handoff]:
    """Three waiting approvals; the queue shows them urgent, high, normal (in this order)."""
    made = {}
    for name, priority in [("normal", "normal"), ("high", "high"), ("urgent", "urgent")]:
        session = make_session(team.project, agent="refunds", title=f"Refund ({name})")
        made[name] = ask(session, kind="approval", payload=APPROVAL, priority=priority)
    return made


def refreshed(handoff: Handoff) -> Handoff:
    return Handoff.objects.get(pk=handoff.pk)


def test_the_queue_moves_with_j_and_k_opens_with_o_and_claims_with_c(team: Team, live_url, watched):
    page = watched
    made = queue_of(team)
    sign_in(page, live_url, team.operator.username)
    queue_url = f"{live_url}/p/{team.project.pk}/handoffs/"
    page.goto(queue_url)
    expect(page.locator(".shortcut-hint")).to_contain_text("Press ? for shortcuts")
    chosen = page.locator("#queue-rows tr.kbd-selected")
    expect(chosen).to_have_count(0)

    page.keyboard.press("j")
    expect(chosen).to_have_id(f"handoff-row-{made['urgent'].pk}")
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("j")  # stays on the last row
    expect(chosen).to_have_id(f"handoff-row-{made['normal'].pk}")
    page.keyboard.press("k")
    expect(chosen).to_have_id(f"handoff-row-{made['high'].pk}")
    page.keyboard.press("ArrowUp")
    expect(chosen).to_have_id(f"handoff-row-{made['urgent'].pk}")
    page.keyboard.press("ArrowDown")
    expect(chosen).to_have_id(f"handoff-row-{made['high'].pk}")
    shoot(page, "keys_queue_selection")

    page.keyboard.press("o")
    page.wait_for_url(f"{live_url}/handoffs/{made['high'].pk}/")
    page.go_back()
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_url}/handoffs/{made['urgent'].pk}/")

    # c claims the chosen row (the page's own form: CSRF, the server's claim) and opens it.
    page.goto(queue_url)
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("c")
    page.wait_for_url(f"{live_url}/handoffs/{made['high'].pk}/")
    expect(page.locator(".you-hold")).to_be_visible()
    assert refreshed(made["high"]).lease_holder_id == team.operator.pk
    # A held row is not claimed again: the page says why, nothing is sent.
    page.goto(queue_url)
    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(chosen).to_have_id(f"handoff-row-{made['high'].pk}")
    page.keyboard.press("c")
    expect(page.locator("#shortcut-said")).to_contain_text("Only a waiting handoff")
    assert page.url == queue_url
    page.check_policy("queue keys")
    page.set_viewport_size({"width": 390, "height": 844})
    shoot(page, "keys_queue_390", full_page=False)


def test_the_workspace_claims_approves_and_goes_next_and_never_fires_while_typing(
    team: Team, live_url, watched
):
    page = watched
    made = queue_of(team)
    sign_in(page, live_url, team.operator.username)
    page.goto(f"{live_url}/handoffs/{made['urgent'].pk}/")
    expect(page.locator("#claim-button")).to_be_visible()
    page.keyboard.press("c")
    expect(page.locator(".you-hold")).to_be_visible()
    assert refreshed(made["urgent"]).lease_holder_id == team.operator.pk

    # Typed into a field, the keys are letters: nothing is approved, rejected or left.
    answer = page.locator("#respond-text")
    answer.click()
    typed = "a careful answer? no; reject it. c n e r"
    page.keyboard.type(typed)
    expect(answer).to_have_value(typed)
    expect(page.locator("#shortcut-help")).to_be_hidden()
    page.wait_for_timeout(500)
    assert refreshed(made["urgent"]).status == "claimed"  # not approved, rejected nor left
    assert page.url == f"{live_url}/handoffs/{made['urgent'].pk}/"

    # Esc leaves the field; a approves as proposed (the page's own button).
    page.keyboard.press("Escape")
    page.keyboard.press("a")
    expect(page.locator("#handoff-status")).to_have_text("Answered")
    assert refreshed(made["urgent"]).answer["type"] == "accept"

    # n: the next waiting handoff after this one in the queue's order.
    page.keyboard.press("n")
    page.wait_for_url(f"{live_url}/handoffs/{made['high'].pk}/")
    # r: the reason box, Enter sends the rejection.
    page.keyboard.press("c")
    expect(page.locator(".you-hold")).to_be_visible()
    page.keyboard.press("r")
    expect(page.locator("#reject-reason")).to_be_focused()
    page.keyboard.type("The refund was already paid.")
    page.keyboard.press("Enter")
    expect(page.locator("#handoff-status")).to_have_text("Answered")
    rejected = refreshed(made["high"]).answer
    assert rejected["type"] == "reject" and rejected["reason"] == "The refund was already paid."

    # e: the arguments' box, for an edit-then-approve.
    page.keyboard.press("n")
    page.wait_for_url(f"{live_url}/handoffs/{made['normal'].pk}/")
    page.keyboard.press("c")
    expect(page.locator(".you-hold")).to_be_visible()
    page.keyboard.press("e")
    expect(page.locator("#edit-args")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator("#edit-args")).not_to_be_focused()

    # Nobody else waiting: n goes back to the queue, saying so.
    page.keyboard.press("n")
    page.wait_for_url(f"{live_url}/p/{team.project.pk}/handoffs/")
    expect(page.locator(".messages")).to_contain_text("Nobody else is waiting")
    page.check_policy("workspace keys")


def test_question_mark_opens_the_help_dialog_and_esc_closes_it(team: Team, live_url, watched):
    page = watched
    made = queue_of(team)
    sign_in(page, live_url, team.operator.username)
    page.goto(f"{live_url}/handoffs/{made['urgent'].pk}/")
    help_dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(help_dialog).to_be_hidden()
    page.keyboard.press("?")
    expect(help_dialog).to_be_visible()
    expect(page.locator("#shortcut-help-close")).to_be_focused()  # the focus moved in
    for key in ("Claim this handoff", "Approve as proposed", "Reject", "next handoff"):
        expect(help_dialog).to_contain_text(key)
    page.keyboard.press("c")  # other keys wait while the list is open
    page.wait_for_timeout(300)
    assert refreshed(made["urgent"]).lease_holder_id is None
    shoot(page, "keys_help", full_page=False)
    page.keyboard.press("Escape")
    expect(help_dialog).to_be_hidden()
    # The hint opens it too (a mouse, a phone); "?" typed in a field is a question mark.
    page.click("[data-shortcut-help]")
    expect(help_dialog).to_be_visible()
    page.click("#shortcut-help-close")
    expect(help_dialog).to_be_hidden()
    page.goto(f"{live_url}/p/{team.project.pk}/handoffs/")
    page.locator("#queue-results").wait_for()
    page.keyboard.press("?")
    expect(help_dialog).to_be_visible()
    expect(help_dialog).to_contain_text("Claim the chosen handoff")
    shoot(page, "keys_help_queue", full_page=False)
    page.keyboard.press("Escape")
    page.check_policy("help dialog")


def test_a_viewers_keys_do_nothing_the_page_does_not_offer(team: Team, live_url, page):
    made = queue_of(team)
    sign_in(page, live_url, team.viewer.username)
    page.goto(f"{live_url}/p/{team.project.pk}/handoffs/")
    page.keyboard.press("j")
    page.keyboard.press("c")
    expect(page.locator("#shortcut-said")).to_contain_text("Operators claim handoffs")
    page.goto(f"{live_url}/handoffs/{made['urgent'].pk}/")
    for key in ("c", "a", "r", "n"):
        page.keyboard.press(key)
    page.wait_for_timeout(500)
    assert page.url == f"{live_url}/handoffs/{made['urgent'].pk}/"
    assert refreshed(made["urgent"]).status == "open"
    assert refreshed(made["urgent"]).lease_holder_id is None
    page.keyboard.press("?")
    help_dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(help_dialog).not_to_contain_text("Approve")


def test_two_people_on_one_workspace_each_see_the_other_live(team: Team, live_url, page, browser):
    handoff = queue_of(team)["urgent"]
    workspace = f"{live_url}/handoffs/{handoff.pk}/"
    # A name that is markup shows as text.
    bob = make_member(team.project, Role.OPERATOR, "bob<i>x</i>")
    line = page.locator("#handoff-presence")
    sign_in(page, live_url, team.operator.username)
    page.goto(workspace)
    page.wait_for_timeout(500)
    expect(line).to_be_hidden()  # alone

    context_b = browser.new_context()
    try:
        page_b = context_b.new_page()
        sign_in(page_b, live_url, bob.username)
        page_b.goto(workspace)
        expect(line).to_be_visible(timeout=PRESENCE_MS)
        expect(line).to_have_text(f"Also viewing: {bob.username}")
        assert line.locator("i").count() == 0
        expect(page_b.locator("#handoff-presence")).to_have_text(
            f"Also viewing: {team.operator.username}", timeout=PRESENCE_MS
        )
        shoot(page, "keys_presence", full_page=False)
        page.set_viewport_size({"width": 390, "height": 844})
        shoot(page, "keys_presence_390", full_page=False)

        # bob's second tab counts once; closing one of the two leaves him there.
        tab_2 = context_b.new_page()
        tab_2.goto(workspace)
        expect(tab_2.locator("#handoff-presence")).to_have_text(
            f"Also viewing: {team.operator.username}", timeout=LIVE_MS
        )
        assert HandoffViewer.objects.filter(user=bob).count() == 2
        expect(line).to_have_text(f"Also viewing: {bob.username}")
        tab_2.close()
        page.wait_for_timeout(1_000)
        expect(line).to_have_text(f"Also viewing: {bob.username}")
    finally:
        context_b.close()
    # bob closed his browser: he leaves alice's line within seconds.
    expect(line).to_be_hidden(timeout=PRESENCE_MS)
    assert not HandoffViewer.objects.filter(user=bob).exists()


def test_presence_reaches_across_server_processes_without_redis(team: Team, browser, tmp_path):
    """The run command's embedded default (no Redis: the LISTEN/NOTIFY channel layer, a
    per-process cache) with two server processes: the presence rows live in the database and
    the changes travel as notices, so each person still sees the other, and the leave."""
    handoff = queue_of(team)["urgent"]
    bob = make_member(team.project, Role.OPERATOR, "bob")
    with asgi_server(workers=2, **no_redis(tmp_path)) as base_url:
        workspace = f"{base_url}/handoffs/{handoff.pk}/"
        context_a, context_b = browser.new_context(), browser.new_context()
        try:
            page_a, page_b = context_a.new_page(), context_b.new_page()
            sign_in(page_a, base_url, team.operator.username)
            page_a.goto(workspace)
            sign_in(page_b, base_url, bob.username)
            page_b.goto(workspace)
            line_a = page_a.locator("#handoff-presence")
            expect(line_a).to_have_text("Also viewing: bob", timeout=PRESENCE_MS)
            expect(page_b.locator("#handoff-presence")).to_have_text(
                f"Also viewing: {team.operator.username}", timeout=PRESENCE_MS
            )
            context_b.close()
            expect(line_a).to_be_hidden(timeout=PRESENCE_MS)
        finally:
            context_a.close()
            context_b.close()
