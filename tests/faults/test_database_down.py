"""The database goes away under a running server, and comes back.

A real uvicorn process on a private PostgreSQL (tests/private_postgres.py); the test stops that
server with `pg_ctl stop`, asks the API and the dashboard, starts it again and asks once more,
never restarting the app server.
"""

import json
import time
import urllib.error
import urllib.request

import pytest

from tests.servers import asgi_server

# The suite's test database is copied into the private server (tests/private_postgres.py).
pytestmark = [
    pytest.mark.requires_redis("the database-down behaviour"),
    pytest.mark.django_db(transaction=True),
]

# Long enough that a request waiting for the pool can never answer within CLIENT_TIMEOUT: a
# server that queues requests until the pool gives up fails this test by the client's timeout.
POOL_TIMEOUT = "60"
CLIENT_TIMEOUT = 5.0


def fetch(url: str, headers: dict[str, str]) -> tuple[int, str, str, float]:
    """(status, content type, body, seconds taken); a client timeout fails the test."""
    began = time.monotonic()
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=CLIENT_TIMEOUT) as response:
            status, content_type, body = (
                response.status,
                response.headers.get("Content-Type", ""),
                response.read().decode(),
            )
    except urllib.error.HTTPError as error:
        status, content_type, body = (
            error.code,
            error.headers.get("Content-Type", ""),
            error.read().decode(),
        )
    except TimeoutError:
        pytest.fail(f"{url} did not answer within {CLIENT_TIMEOUT} s (waiting for the pool?)")
    return status, content_type, body, time.monotonic() - began


def test_api_and_dashboard_answer_503_while_the_database_is_down_and_recover(private_pg, fixtures):
    api_headers = {"Authorization": f"Bearer {fixtures['key']}"}
    page_headers = {"Cookie": f"sessionid={fixtures['cookie']}"}
    with asgi_server(**private_pg.env(DB_POOL_TIMEOUT=POOL_TIMEOUT)) as base:
        api_url = f"{base}/api/v1/sessions"
        page_url = f"{base}/p/{fixtures['project_id']}/"
        assert fetch(api_url, api_headers)[0] == 200
        assert fetch(page_url, page_headers)[0] == 200

        private_pg.stop()
        try:
            # Several in a row: the first ones meet the pool's dead connections, the later ones
            # an empty pool whose reconnection attempts fail.
            for _ in range(4):
                status, content_type, body, took = fetch(api_url, api_headers)
                print(f"API while down: {status} in {took:.3f} s")
                assert status == 503, body
                assert content_type.startswith("application/json")
                assert json.loads(body)["error"]["code"] == "unavailable"

                status, content_type, body, took = fetch(page_url, page_headers)
                print(f"dashboard while down: {status} in {took:.3f} s")
                assert status == 503, body[:1000]
                assert content_type.startswith("text/html")
                assert "temporarily unavailable" in body
                assert "Traceback" not in body
        finally:
            private_pg.start()

        # Back by itself: the very next requests succeed, with no restart of the app server.
        status, _, body, took = fetch(api_url, api_headers)
        print(f"API after restart: {status} in {took:.3f} s")
        assert status == 200, body
        status, _, body, took = fetch(page_url, page_headers)
        print(f"dashboard after restart: {status} in {took:.3f} s")
        assert status == 200, body[:500]


# Static files from the app folders with DEBUG off too (tests never collectstatic).
PRODUCTION = {"DEBUG": "false", "SECRET_KEY": "faults-test-secret-key-" + "x" * 40}


def test_errors_outside_views_answer_503_not_500_while_the_database_is_down(private_pg, fixtures):
    """What fails before or after a view (the session loaded while rendering the not-found
    page, the session middleware saving its changes) reaches Django's last-resort handler,
    which answered the 500 page; a database outage answers the friendly 503 there too."""
    page_headers = {"Cookie": f"sessionid={fixtures['cookie']}"}
    api_headers = {"Authorization": f"Bearer {fixtures['key']}", **page_headers}
    with asgi_server(**private_pg.env(DB_POOL_TIMEOUT=POOL_TIMEOUT, **PRODUCTION)) as base:
        missing_page = f"{base}/p/{fixtures['project_id']}/no-such-page/"
        missing_api = f"{base}/api/v1/no-such-endpoint"
        assert fetch(missing_page, page_headers)[0] == 404
        assert fetch(missing_api, api_headers)[0] == 404

        private_pg.stop()
        try:
            for _ in range(2):
                status, content_type, body, _ = fetch(missing_page, page_headers)
                print("not-found page while down:", status)
                assert status == 503, body[:1000]
                assert content_type.startswith("text/html")
                assert "temporarily unavailable" in body and "Traceback" not in body
                # Under /api/ (a browser's cookie along) nothing outside the view reads the
                # database: the API's stack has no session layer (config/handlers.py), so an
                # unknown endpoint is still its JSON 404, never a 500.
                status, content_type, body, _ = fetch(missing_api, api_headers)
                assert status == 404, body[:1000]
                assert content_type.startswith("application/json")
                assert json.loads(body)["error"]["code"] == "not_found"
        finally:
            private_pg.start()
        # Back by itself (a request or two may still meet the server starting up).
        deadline = time.monotonic() + 20
        while (status := fetch(missing_page, page_headers)[0]) == 503:
            assert time.monotonic() < deadline, "still 503 twenty seconds after the restart"
            time.sleep(0.2)
        assert status == 404
