"""The retention page in a browser: an admin changes the policy, sees the preview, saves it,
queues the jobs from the page and sees the runs go from queued to finished, live, as a real
Celery worker takes them (and the chart); with the broker down the page says so. The run list
also updates live on a second, viewer's page. A viewer reads the policy without a form. No
console errors."""

import re
import uuid
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
from tests.servers import asgi_server, celery_processes, free_port, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.requires_redis("the page queues the jobs on Celery")
def test_an_admin_previews_saves_queues_a_run_and_sees_it_finish_live(
    team: Team, page, screenshot, tmp_path
):
    queue = f"sb-retention-page-{uuid.uuid4().hex[:12]}"
    with asgi_server(SWITCHBOARD_RETENTION_QUEUE=queue) as live_url:
        _previews_saves_and_runs(team, live_url, page, screenshot, queue, tmp_path)


def _previews_saves_and_runs(team: Team, live_url, page, screenshot, queue, tmp_path):
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
    # An agent override, in the form (one blank form shown; the button adds another).
    page.select_option("#id_agents-0-agent", "test-agent")
    page.fill("#id_agents-0-archive_closed_after", "36")
    page.select_option("#id_agents-0-archive_closed_after_unit", "hours")
    page.get_by_role("button", name="Add an override").click()
    expect(page.locator("fieldset.override")).to_have_count(2)
    expect(page.locator("#id_agents-1-agent")).to_be_focused()
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#preview")).to_contain_text("Includes the overrides for test-agent.")
    expect(page.locator("#preview-compact .count")).to_have_text("3")
    assert not RetentionPolicy.objects.exists()  # a preview saves nothing
    screenshot("retention-preview")

    page.get_by_role("button", name="Save policy").click()
    expect(page.locator(".messages")).to_contain_text("Retention policy saved.")
    assert RetentionPolicy.objects.get(agent=None).compact_after == timedelta(days=1)
    override = RetentionPolicy.objects.get(agent__name="test-agent")
    assert override.overrides == ["archive_closed_after"]
    assert override.archive_closed_after == timedelta(hours=36)

    # No worker yet: the request only queues the jobs, and the runs show as queued.
    page.get_by_role("button", name="Run retention now").click()
    expect(page.locator(".messages")).to_contain_text("Retention queued")
    run = RetentionRun.objects.get(job="compact_sessions")
    row = page.locator(f"#run-{run.pk}")
    expect(row).to_contain_text("compact_sessions")
    expect(row).to_contain_text("queued")
    assert run.status == "queued" and run.compacted == 0
    page.wait_for_function("document.querySelector('[ws-connect]') !== null")
    page.wait_for_timeout(500)  # the socket joins its group

    # A real worker on the page's queue takes both: the row turns succeeded without a reload.
    with celery_processes(queue, tmp_path) as log:
        wait_until(lambda: "ready." in log.read_text(), log)
        expect(row).to_contain_text("succeeded", timeout=30_000)
    expect(row.locator("td").nth(6)).to_have_text("3")  # compacted
    run.refresh_from_db()
    assert run.compacted == 3 and run.trigger == f"user:{team.admin.username}"
    assert RetentionRun.objects.filter(status="succeeded").count() == 2
    expect(page.locator(".freed-chart rect.bar")).to_have_count(14)
    screenshot("retention-after-run")
    assert problems == []


def test_with_the_broker_down_running_now_says_so_and_the_runs_are_marked_failed(team: Team, page):
    dead_broker = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    with asgi_server(CELERY_BROKER_URL=dead_broker) as live_url:
        sign_in(page, live_url, team.admin.username)
        page.goto(f"{live_url}/p/{team.project.pk}/retention/")
        response = None

        def seen(r):
            nonlocal response
            if r.request.method == "POST":
                response = r

        page.on("response", seen)
        page.get_by_role("button", name="Run retention now").click()
        expect(page.locator(".messages")).to_contain_text("The job queue is unavailable")
        assert response is not None and response.status == 302
        assert set(RetentionRun.objects.values_list("status", flat=True)) == {"failed"}
        expect(page.locator("table.runs")).to_contain_text("failed")


def test_a_viewer_reads_the_policy_and_sees_runs_arrive_live(team: Team, live_url, page):
    sign_in(page, live_url, team.viewer.username)
    page.goto(f"{live_url}/p/{team.project.pk}/retention/")
    expect(page.locator("#policy-form")).to_have_count(0)
    expect(page.locator("table.policy-read")).to_contain_text("Compact closed sessions after")
    expect(page.get_by_role("button", name="Run retention now")).to_have_count(0)
    page.wait_for_function("document.querySelector('[ws-connect]') !== null")
    page.wait_for_timeout(500)  # the socket joins its group
    run = run_job_for_project("compact_sessions", team.project.pk, trigger="tests")
    expect(page.locator(f"#run-{run.pk}")).to_be_visible(timeout=10_000)


def test_a_viewer_reads_human_words_and_an_empty_chart_says_so(
    team: Team, live_url, page, screenshot
):
    """Labels, not field names; "run by <name>", not "user:<name>"; and, with nothing freed
    in the chart's days, a sentence instead of an empty box."""
    RetentionRun.objects.create(
        project=team.project, job="compact_sessions", trigger=f"user:{team.admin.username}"
    )
    sign_in(page, live_url, team.viewer.username)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_url}/p/{team.project.pk}/retention/")
        policy = page.locator("table.policy-read")
        expect(policy).to_contain_text("Close idle sessions after")
        expect(policy).to_contain_text("Keep longer sessions that")
        heading = policy.locator("th").first
        assert heading.evaluate("el => getComputedStyle(el).textTransform") == "none"
        screenshot(f"retention-viewer-{width}")
    text = page.locator("main").inner_text()
    for raw in ("close_idle_after", "CLOSE_IDLE_AFTER", "compact_after", "keep_outcomes", "user:"):
        assert raw not in text, raw
    expect(page.locator("table.runs")).to_contain_text(f"run by {team.admin.username}")
    expect(page.locator("#freed-none")).to_have_text(re.compile("Nothing freed yet"))
    expect(page.locator(".freed-chart")).to_have_count(0)
