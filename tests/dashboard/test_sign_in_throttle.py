"""Sign-in throttling: failed sign-ins are counted per account and per address; past the limit
the sign-in page answers a friendly 429 saying when to try again, and after the window the
right password works. Only failures count, so many successful sign-ins (the browser tests)
never trip it. The shipped defaults apply: 5 per account, 20 per address, 15 minutes.
"""

import itertools
from datetime import UTC, datetime, timedelta

import time_machine
from django.conf import settings
from django.test import Client
from django.urls import reverse

from tests.factories import make_user

# One minute into the next 15-minute window (near today: sessions made then must not be expired).
_now = datetime.now(UTC).replace(second=0, microsecond=0)
START = _now + timedelta(minutes=15 - _now.minute % 15 + 1)
PASSWORD = "pw-for-tests-1"
_addresses = itertools.count(1)


def new_address() -> str:
    """A fresh client address per test: the per-address count must not leak between tests."""
    n = next(_addresses)
    return f"10.77.{n // 250}.{n % 250 + 1}"


def sign_in(client: Client, username: str, password: str, *, forwarded_for: str | None = None):
    """POST the sign-in form; `forwarded_for`: the X-Forwarded-For header, if any."""
    headers = {} if forwarded_for is None else {"X-Forwarded-For": forwarded_for}
    return client.post(
        reverse("login"), {"username": username, "password": password}, headers=headers
    )


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_the_shipped_defaults_apply():
    assert settings.SWITCHBOARD_LOGIN_FAILURES_PER_ACCOUNT == 5
    assert settings.SWITCHBOARD_LOGIN_FAILURES_PER_ADDRESS == 20
    assert settings.SWITCHBOARD_LOGIN_WINDOW_SECONDS == 15 * 60


def test_it_locks_an_account_after_five_failures_with_a_friendly_page(db):
    user, bystander = make_user(), make_user()
    client = Client(REMOTE_ADDR=new_address())
    with time_machine.travel(START, tick=False):
        failures = [sign_in(client, user.username, "wrong").status_code for _ in range(5)]
        locked = sign_in(client, user.username, PASSWORD)
        # From elsewhere too: the count is the account's.
        elsewhere = sign_in(Client(REMOTE_ADDR=new_address()), user.username, PASSWORD)
        other_account = sign_in(client, bystander.username, PASSWORD)
    assert failures == [200] * 5
    assert locked.status_code == 429
    assert locked["Retry-After"] == "840"  # the window ends 14 minutes later
    page = locked.content.decode()
    assert "Too many failed sign-ins for this account" in page
    assert "14 minutes" in page
    assert "<form" not in page  # no password is checked while locked
    assert elsewhere.status_code == 429
    # Another account from the same address is unaffected (5 failures < 20 per address).
    assert other_account.status_code == 302
    assert signed_in(client)


def test_it_locks_an_address_after_twenty_failures(db):
    user = make_user()
    address = new_address()
    client = Client(REMOTE_ADDR=address)
    with time_machine.travel(START, tick=False):
        # Twenty different names, so no single account reaches its own limit.
        failures = [sign_in(client, f"nobody-{i}", "wrong").status_code for i in range(20)]
        locked = sign_in(client, user.username, PASSWORD)
        other_address = Client(REMOTE_ADDR=new_address())
        allowed = sign_in(other_address, user.username, PASSWORD)
    assert failures == [200] * 20
    assert locked.status_code == 429
    assert "Too many failed sign-ins from your address" in locked.content.decode()
    assert not signed_in(client)
    assert allowed.status_code == 302
    assert signed_in(other_address)


def test_it_counts_only_failures_per_address(db):
    address = new_address()
    with time_machine.travel(START, tick=False):
        statuses = [
            sign_in(Client(REMOTE_ADDR=address), make_user().username, PASSWORD).status_code
            for _ in range(25)
        ]
    assert statuses == [302] * 25


def test_the_right_password_works_after_the_window(db):
    user = make_user()
    client = Client(REMOTE_ADDR=new_address())
    with time_machine.travel(START, tick=False):
        for _ in range(5):
            sign_in(client, user.username, "wrong")
        assert sign_in(client, user.username, PASSWORD).status_code == 429
    with time_machine.travel(START + timedelta(minutes=14), tick=False):
        assert sign_in(client, user.username, PASSWORD).status_code == 302
    assert signed_in(client)


def test_the_admin_sign_in_goes_through_the_throttled_page(db):
    response = Client().get("/admin/login/?next=/admin/")
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next=/admin/"


# --- The client address (issue 23, defect 3) -------------------------------------------------
# The per-address count is by core.client_address: the connection's address, unless it is a
# trusted proxy (SWITCHBOARD_TRUSTED_PROXIES), then the client's from X-Forwarded-For.
# Real servers: tests/dashboard/test_sign_in_servers.py.


def fail_twenty_times(client: Client, forwarded_for) -> list[int]:
    """Twenty failed sign-ins under twenty names; X-Forwarded-For from forwarded_for(i)."""
    return [
        sign_in(client, f"nobody-{i}", "wrong", forwarded_for=forwarded_for(i)).status_code
        for i in range(20)
    ]


def test_a_direct_client_cannot_name_its_own_address(db, settings):
    settings.SWITCHBOARD_TRUSTED_PROXIES = ["10.0.0.0/8"]  # a proxy, but not this connection
    user = make_user()
    client = Client(REMOTE_ADDR="198.51.100.20")
    with time_machine.travel(START, tick=False):
        # A fresh address in the header each time: were it believed, no address would fill up.
        failures = fail_twenty_times(client, lambda i: f"203.0.113.{i + 1}")
        locked = sign_in(client, user.username, PASSWORD, forwarded_for="203.0.113.99")
    assert failures == [200] * 20
    assert locked.status_code == 429
    assert "Too many failed sign-ins from your address" in locked.content.decode()


def test_clients_behind_a_trusted_proxy_are_counted_apart(db, settings):
    proxy = new_address()
    settings.SWITCHBOARD_TRUSTED_PROXIES = [proxy, "192.168.0.0/16"]
    user = make_user()
    client = Client(REMOTE_ADDR=proxy)
    with time_machine.travel(START, tick=False):
        # Through two proxies (an inner one of 192.168/16), from 198.51.100.30, which also
        # writes a header of its own into the request, a different one each time.
        failures = fail_twenty_times(
            client, lambda i: f"203.0.113.{i + 1}, 198.51.100.30, 192.168.1.1"
        )
        locked = sign_in(
            client, user.username, PASSWORD, forwarded_for="198.51.100.30, 192.168.1.1"
        )
        other = Client(REMOTE_ADDR=proxy)
        allowed = sign_in(
            other, user.username, PASSWORD, forwarded_for="198.51.100.31, 192.168.1.1"
        )
    assert failures == [200] * 20
    assert locked.status_code == 429
    assert allowed.status_code == 302
    assert signed_in(other)
