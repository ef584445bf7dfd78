"""Browser tests: Playwright drives Debian's /usr/bin/chromium against a real uvicorn server."""

import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from handoffs_app.models import HandoffViewer
from tests.conftest import skip_unless_ci
from tests.servers import asgi_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ARTIFACTS = Path(__file__).resolve().parent.parent.parent / "test-artifacts"


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    browser_items = []
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            browser_items.append(item)
            item.add_marker(pytest.mark.browser)
    # Browser tests run last. Once sync Playwright has started (a session fixture), its event
    # loop stays registered as running in the main thread for the rest of the session, and
    # every later async_to_sync() there fails ("cannot use AsyncToSync in the same thread as
    # an async event loop"): the websocket tests in tests/realtime, for one.
    if browser_items:
        chosen = set(map(id, browser_items))
        items[:] = [i for i in items if id(i) not in chosen] + browser_items


def pytest_runtest_setup(item):
    """Without Debian's chromium a browser test is skipped with the reason; under CI (CI set)
    it fails instead: CI installs chromium (.ci/run)."""
    if not Path(CHROMIUM).exists():
        skip_unless_ci(
            f"{CHROMIUM} missing: install Debian's chromium (.ci/run does)",
            "CI installs chromium (bash .ci/run)",
        )


@pytest.fixture(scope="session")
def playwright(playwright):
    """pytest-playwright's fixture, with the ORM allowed in the test thread while it runs.

    Sync Playwright starts an asyncio loop in the test thread and leaves it registered as
    running there until it stops, so Django would refuse the tests' (and their fixtures')
    database calls as "async unsafe". They are plain blocking calls in a thread the loop never
    runs concurrently with, so the check is lifted for exactly that span: from Playwright's
    start to its stop, which includes a test database set up or torn down inside it. Only the
    browser tests start Playwright (and they run last); servers never inherit the flag
    (tests.servers.child_env drops it).
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        yield playwright


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1280, "height": 900}}


@pytest.fixture(scope="session")
def live_url(django_db_setup, django_db_blocker):
    """One real ASGI server for the browser tests, on the test database."""
    with django_db_blocker.unblock():
        with asgi_server() as base_url:
            yield base_url
        others_gone_from_the_database()


def others_gone_from_the_database(timeout: float = 5) -> None:
    """Wait until no other connection is on this test database; end any still there after
    `timeout`, naming them on stderr. A stopped server's connections close as its process exits
    and PostgreSQL ends their backends a moment later; the test database is dropped right after
    the browser tests, and CI warned it was "being accessed by other users" (and left it
    behind), once even after a wait of 10 s: whatever held it, it was done with it by then."""
    others = (
        "SELECT pid, application_name, client_port, state, left(query, 80)"
        " FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while True:
            cursor.execute(others)
            left = cursor.fetchall()
            if not left:
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        print(f"\nconnections left on the test database, ended: {left}", file=sys.stderr)
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid",
            [[row[0] for row in left]],
        )


@pytest.fixture(autouse=True)
def pages_let_go(request):
    """After a browser test, before its database is flushed: every page closed, and the server
    done with them.

    A handoff workspace's socket writes and reads its presence row every few seconds until the
    server sees the page close. Had one run on into the flush, its queries and the flush's
    TRUNCATE would take their tables' locks in different orders, and PostgreSQL refuses one of
    them as a deadlock (CI saw "couldn't be flushed"). The server deletes a page's presence row
    once it has stopped that page's heartbeat, so no row left means no socket still working.
    This fixture is set up after the test database's (autouse, pytest-django's first) and
    before the test's pages, so it runs after those pages have closed and before the flush.
    """
    browser = request.getfixturevalue("browser") if "browser" in request.fixturenames else None
    yield
    if browser is None or request.node.get_closest_marker("django_db") is None:
        return
    for context in browser.contexts:  # any a test opened and left open
        context.close()
    deadline = time.monotonic() + 15
    while left := list(HandoffViewer.objects.values_list("channel_name", flat=True)):
        if time.monotonic() > deadline:
            pytest.fail(f"the server still shows closed pages as viewing a handoff: {left}")
        time.sleep(0.05)


@pytest.fixture
def screenshot(page):
    ARTIFACTS.mkdir(exist_ok=True)

    def take(name: str) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


def sign_in(page, live_url: str, username: str, password: str = "pw-for-tests-1") -> None:
    page.goto(f"{live_url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")
