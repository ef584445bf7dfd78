"""Live pages on the run command's own setup (issue 26, section 1): no Redis for the app
processes, a uvicorn server, and a real Celery worker with beat started as `bash scripts/run`
starts them (its command line is read from the script). What the worker and beat change reaches
open pages without a reload: a lapsed claim leaves a colleague's queue and workspace, a handoff
the SLA job made overdue reads overdue and HIGH, the overview's overdue count moves, a session
archived by retention reads "Archived", and the retention runs a page queued update live.

With SWITCHBOARD_CHANNEL_LAYER=memory (notices stay in the process that made them) the Live
indicator says "Not live", and why, instead of turning green.

Screenshots go to a folder under pytest's tmp dir, printed by each test.
"""

import re
import shlex
import subprocess
import sys
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from django.utils import timezone
from playwright.sync_api import expect

from handoffs_app.models import HandoffSettings
from handoffs_app.services.handoffs import claim_handoff
from tests.browser.conftest import sign_in
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_session
from tests.handoffs.helpers import ask
from tests.retention.helpers import append, closed, conversation
from tests.servers import ROOT, asgi_server, child_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LIVE_MS = 30_000  # a beat tick (1 s here, up to 5 s) plus the job and the push


def scripts_run_worker_command() -> list[str]:
    """The Celery command line of scripts/run (worker with beat), run by this interpreter."""
    script = (ROOT / "scripts" / "run").read_text()
    match = re.search(r"^celery -A config worker (?:.*\\\n)*.*$", script, re.MULTILINE)
    assert match, "scripts/run no longer starts `celery -A config worker`"
    words = shlex.split(match.group(0).replace("\\\n", " "))
    words = [w for w in words if w != "&"]
    assert words[:4] == ["celery", "-A", "config", "worker"] and "-B" in words, words
    return [sys.executable, "-m", *words]


@contextmanager
def worker_with_beat(log: Path, **env: str):
    with log.open("w") as out:
        process = subprocess.Popen(
            scripts_run_worker_command(),
            cwd=ROOT,
            env=child_env(**env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def no_redis(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The app processes' environment as on `bash scripts/run` without REDIS_URL: the embedded
    channel layer and a filesystem broker (a folder of this test's own)."""
    return {
        "REDIS_URL": "",
        "CELERY_FILESYSTEM_BROKER_DIR": str(tmp_path / "broker"),
        # Beat's handoff jobs every second (the defaults are 15 s and 30 s).
        "SWITCHBOARD_HANDOFF_LEASE_CHECK_SECONDS": "1",
        "SWITCHBOARD_HANDOFF_SLA_SECONDS": "1",
        **extra,
    }


def shots_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "shots"
    folder.mkdir()
    print(f"\nscreenshots: {folder}")
    return folder


def opened(context, url: str):
    """A new tab on `url`, once its socket is open; marked so a reload would show."""
    tab = context.new_page()
    tab.goto(url)
    expect(tab.locator(".live-dot.on")).to_be_attached()
    tab.wait_for_timeout(300)  # the socket joins its groups after the handshake
    tab.evaluate("window.notReloaded = true")
    return tab


def still_the_same_page(tab) -> None:
    assert tab.evaluate("window.notReloaded === true"), "the page was reloaded"


def test_what_the_worker_and_beat_change_reaches_open_pages_without_redis(
    team: Team, page, tmp_path
):
    shots = shots_folder(tmp_path)
    project = team.project
    # A one-second lease; the question is due a second after it is asked.
    HandoffSettings.objects.update_or_create(project=project, defaults={"lease_seconds": 1})
    claimed = ask(make_session(project, title="Refund A-1001"), kind="approval")
    claim_handoff(claimed, user=team.operator)
    due = ask(make_session(project, title="Which address?"), kind="question", due_in=1)
    # Closed ten days ago: past the default archive_closed_after (7 days), not yet due for
    # compaction (30 days), so the run's two jobs do not both want it at once.
    with time_machine.travel(timezone.now() - timedelta(days=10)):
        old = make_session(project, title="Closed ten days ago")
        append(old, conversation(4))
        closed(old)
    env = no_redis(tmp_path)

    with asgi_server(**env) as live_url:
        sign_in(page, live_url, team.admin.username)
        context = page.context
        # Opened before any job runs: what they show is as stale as the issue describes.
        queue = opened(context, f"{live_url}/p/{project.pk}/handoffs/")
        claimed_row, due_row = (
            queue.locator(f"#handoff-row-{claimed.pk}"),
            queue.locator(f"#handoff-row-{due.pk}"),
        )
        expect(claimed_row).to_contain_text("Claimed")
        expect(claimed_row.locator("td.holder")).to_have_text(team.operator.username)
        expect(due_row.locator(".priority")).to_have_text("normal")
        workspace = opened(context, f"{live_url}/handoffs/{claimed.pk}/")
        expect(workspace.locator("#handoff-holder")).to_contain_text(team.operator.username)
        # The page itself knows the lease ran out (offers Claim); the job's sweep shows below.
        expect(workspace.locator("#handoff-actions")).to_contain_text("has lapsed")
        overview = opened(context, f"{live_url}/p/{project.pk}/")
        overdue_stat = overview.locator(".stat-card", has_text="Overdue").locator(".stat")
        expect(overdue_stat).to_have_text("0")
        session_page = opened(context, f"{live_url}/sessions/{old.pk}/")
        expect(session_page.locator("#header-status")).to_have_text("Closed")
        watcher = opened(context, f"{live_url}/p/{project.pk}/retention/")
        expect(watcher.locator("table.runs tbody tr[id^=run-]")).to_have_count(0)
        for tab in (queue, workspace, overview, session_page, watcher):
            expect(tab.locator(".live-status")).to_contain_text("Live")

        with worker_with_beat(tmp_path / "celery.log", **env):
            # (1) The lease-expiry job returns the claim to the queue: gone from the colleague's
            # queue row and workspace.
            expect(claimed_row.locator("td.holder")).to_have_text("—", timeout=LIVE_MS)
            expect(claimed_row).to_contain_text("Open")
            expect(workspace.locator("#handoff-holder")).to_contain_text("nobody", timeout=LIVE_MS)
            expect(workspace.locator("#handoff-actions")).not_to_contain_text("has lapsed")
            # (2) The SLA job marks the question overdue and raises it to HIGH.
            expect(due_row.locator(".priority")).to_have_text("high", timeout=LIVE_MS)
            expect(due_row.locator(".sla")).to_contain_text("overdue")
            # (3) The overview's overdue count.
            expect(overdue_stat).to_have_text("1", timeout=LIVE_MS)
            queue.screenshot(path=str(shots / "live-queue-lease-lapsed-and-overdue.png"))
            workspace.screenshot(path=str(shots / "live-workspace-lease-lapsed.png"))
            overview.screenshot(path=str(shots / "live-overview-overdue-count.png"))

            # (4) "Run retention now" on one tab; the worker archives the old closed
            # session: its open page reads Archived, and another tab's runs arrive and finish.
            runner = opened(context, f"{live_url}/p/{project.pk}/retention/")
            runner.get_by_role("button", name="Run retention now").click()
            expect(runner.locator(".messages")).to_contain_text("Retention queued")
            expect(session_page.locator("#header-status")).to_have_text("Archived", timeout=LIVE_MS)
            runs = watcher.locator("table.runs tbody tr[id^=run-]")
            expect(runs).to_have_count(2, timeout=20_000)
            for i in range(2):
                expect(runs.nth(i)).to_contain_text("succeeded", timeout=20_000)
            session_page.screenshot(path=str(shots / "live-session-archived.png"))
            watcher.screenshot(path=str(shots / "live-retention-runs.png"), full_page=True)

        for tab in (queue, workspace, overview, session_page, watcher):
            still_the_same_page(tab)


def test_the_live_indicator_says_not_live_when_notices_stay_in_one_process(
    team: Team, page, tmp_path
):
    shots = shots_folder(tmp_path)
    env = no_redis(tmp_path, SWITCHBOARD_CHANNEL_LAYER="memory")
    with asgi_server(**env) as live_url:
        sign_in(page, live_url, team.operator.username)
        # Marked in the DOM (a locator waits for it; polling a JS expression would need eval,
        # which the page's CSP refuses).
        page.add_init_script(
            "document.addEventListener('htmx:wsOpen', function () {"
            " document.documentElement.setAttribute('data-ws-open', ''); });"
        )
        page.goto(f"{live_url}/p/{team.project.pk}/handoffs/")
        # The socket opens: its own process's changes still come.
        expect(page.locator("html[data-ws-open]")).to_be_attached()
        page.wait_for_timeout(200)
        status = page.locator(".live-status")
        expect(status).to_have_text("Not live")
        expect(status).to_have_attribute("title", re.compile(r"only when you reload"))
        expect(status).to_have_attribute("title", re.compile(r"Celery worker and beat"))
        expect(page.locator(".live-dot.partial")).to_be_visible()
        expect(page.locator(".live-dot.on")).to_have_count(0)
        page.screenshot(path=str(shots / "not-live-indicator.png"))
