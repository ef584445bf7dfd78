"""The retention page in a browser: an admin changes the policy, sees the preview, saves it,
runs the jobs from the page and sees the run (and the chart); the run list also updates live
on a second, viewer's page. A viewer reads the policy without a form. No console errors."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone
from playwright.sync_api import expect

from retention_app.models import RetentionPolicy, RetentionRun
from retention_app.services.jobs import run_job_for_project
from tests.browser.conftest import sign_in
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_session
from tests.retention.helpers import append, closed, conversation

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_previews_saves_runs_and_sees_the_run(team: Team, live_url, page, screenshot):
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    with time_machine.travel(timezone.now() - timedelta(days=3)):
        for _ in range(3):
            session = make_session(team.project)
            append(session, conversation(40))
            closed(session)
    sign_in(page, live_url, team.admin.username)
    page.goto(f"{live_url}/p/{team.project.pk}/")
    page.get_by_role("link", name="Retention").click()
    expect(page.get_by_role("heading", name="Retention", exact=True)).to_be_visible()

    page.fill("#id_compact_after", "1")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#preview-compact .count")).to_have_text("3")
    assert not RetentionPolicy.objects.exists()  # a preview saves nothing
    screenshot("retention-preview")

    page.get_by_role("button", name="Save policy").click()
    expect(page.locator(".messages")).to_contain_text("Retention policy saved.")
    assert RetentionPolicy.objects.get().compact_after == timedelta(days=1)

    page.get_by_role("button", name="Run retention now").click()
    expect(page.locator(".messages")).to_contain_text("3 compacted")
    run = RetentionRun.objects.get(job="compact_sessions")
    row = page.locator(f"#run-{run.pk}")
    expect(row).to_contain_text("compact_sessions")
    expect(row).to_contain_text("succeeded")
    expect(page.locator(".freed-chart rect.bar")).to_have_count(14)
    screenshot("retention-after-run")
    assert problems == []


def test_a_viewer_reads_the_policy_and_sees_runs_arrive_live(team: Team, live_url, page):
    sign_in(page, live_url, team.viewer.username)
    page.goto(f"{live_url}/p/{team.project.pk}/retention/")
    expect(page.locator("#policy-form")).to_have_count(0)
    expect(page.locator("table.policy-read")).to_contain_text("compact_after")
    expect(page.get_by_role("button", name="Run retention now")).to_have_count(0)
    page.wait_for_function("document.querySelector('[ws-connect]') !== null")
    page.wait_for_timeout(500)  # the socket joins its group
    run = run_job_for_project("compact_sessions", team.project.pk, trigger="tests")
    expect(page.locator(f"#run-{run.pk}")).to_be_visible(timeout=10_000)
