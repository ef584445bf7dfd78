"""The webhooks page in a browser (a smoke test): an admin reaches it from the navigation,
adds an endpoint and copies its secret, sees the delivery a pause produced, and redelivers
it; the receiver (a real one on the loopback) verifies both requests with that secret. No
console errors (the strict CSP refuses any inline script or style)."""

import pytest
from playwright.sync_api import expect

from core.actors import Actor
from core.models import WebhookDelivery
from core.services.webhooks import deliver_due
from core.webhooks import verify_signature
from sessions_app.services.lifecycle import pause_session
from tests.browser.conftest import sign_in
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_session
from tests.webhooks.receiver import receiver

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_adds_an_endpoint_sees_the_delivery_and_redelivers_it(
    team: Team, live_url, page, screenshot
):
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    with receiver() as recv:
        sign_in(page, live_url, team.admin.username)
        page.goto(f"{live_url}/p/{team.project.pk}/")
        # Webhooks are a section of the project's settings.
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Settings").click()
        page.get_by_role("navigation", name="Project settings").get_by_role(
            "link", name="Webhooks"
        ).click()
        expect(page.get_by_role("heading", name="Webhooks", level=1)).to_be_visible()

        page.fill("#id_url", recv.url)
        page.get_by_label("session.paused", exact=False).check()
        page.get_by_role("button", name="Add endpoint").click()
        secret = page.locator("#webhook-secret").inner_text()
        assert secret.startswith("whsec_")
        screenshot("webhooks-created")

        session = make_session(team.project)
        pause_session(session, actor=Actor.system("agent"), reason="needs a human")
        deliver_due()
        delivery = WebhookDelivery.objects.get()
        page.goto(f"{live_url}/p/{team.project.pk}/webhooks/")
        expect(page.locator("#webhook-secret")).to_have_count(0)  # shown once only
        row = page.locator(f"#delivery-{delivery.pk}")
        expect(row).to_contain_text("session.paused")
        expect(row.locator(".status")).to_have_text("Succeeded")

        row.get_by_role("button", name="Redeliver").click()
        expect(page.locator(".messages")).to_contain_text("Redelivered: the receiver answered 200.")
        screenshot("webhooks-redelivered")

        first, second = recv.wait_for(2)
        for request in (first, second):
            assert verify_signature(secret, request.headers["switchboard-signature"], request.body)
            assert request.headers["switchboard-delivery"] == str(delivery.pk)
    assert problems == []
