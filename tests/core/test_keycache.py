"""core/keycache.py: a process reads a key from the database once, then confirms it on each
request against the keys' epoch in Redis; a change anywhere retires every process's entries at
their next request, and an entry is never trusted longer than SWITCHBOARD_API_KEY_CACHE_SECONDS
(the bound for a change whose new epoch never reached Redis).

"Another process" is played by what it would do: write the database, and publish a new epoch
(or not) in the shared Redis.
"""

import time

import pytest
from django.core.cache import caches
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core import keycache
from core.models import ApiKey
from core.services.projects import authenticate_api_key, authenticate_api_key_counted
from tests.factories import make_api_key, make_project

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.requires_redis("the key cache (it needs a store the processes share)"),
]


@pytest.fixture(autouse=True)
def empty_cache():
    keycache.forget_all()
    yield
    keycache.forget_all()


def key_queries(raw: str) -> tuple[ApiKey | None, int]:
    """authenticate_api_key(raw), and how many statements it sent to the database."""
    with CaptureQueriesContext(connection) as queries:
        api_key = authenticate_api_key(raw)
    return api_key, len(queries)


def test_a_key_is_read_from_the_database_once_then_confirmed_in_redis():
    api_key, raw = make_api_key(make_project())
    first, first_queries = key_queries(raw)
    second, second_queries = key_queries(raw)
    assert first is not None and second is not None
    assert first.pk == second.pk == api_key.pk
    assert second.project.pk == api_key.project_id
    assert first_queries >= 1
    assert second_queries == 0
    assert first is not second  # each request gets its own instance to change


def test_a_wrong_secret_with_a_cached_prefix_is_refused():
    _, raw = make_api_key(make_project())
    assert authenticate_api_key(raw) is not None
    forged = raw[:-4] + ("AAAA" if not raw.endswith("AAAA") else "BBBB")
    assert authenticate_api_key(forged) is None


def test_a_revocation_by_another_process_is_seen_at_the_next_request():
    api_key, raw = make_api_key(make_project())
    assert authenticate_api_key(raw) is not None  # cached here
    # Another process revokes: its row change, then its new epoch after the commit.
    ApiKey.objects.filter(pk=api_key.pk).update(revoked_at=timezone.now())
    keycache._new_epoch()
    refused, queries = key_queries(raw)
    assert refused is None
    assert queries >= 1  # the stale entry sent it back to the database


def test_without_a_new_epoch_a_change_is_seen_within_the_bound():
    api_key, raw = make_api_key(make_project())
    with override_settings(SWITCHBOARD_API_KEY_CACHE_SECONDS=1):
        assert authenticate_api_key(raw) is not None
        # A change that never reached Redis (SQL outside the services, or Redis down then).
        ApiKey.objects.filter(pk=api_key.pk).update(revoked_at=timezone.now())
        assert authenticate_api_key(raw) is not None  # still trusted: inside the bound
        time.sleep(1.05)
        assert authenticate_api_key(raw) is None


def test_a_lost_epoch_is_never_taken_for_the_old_one():
    """Redis flushed (or restarted empty): no entry matches the epoch drawn afresh."""
    _, raw = make_api_key(make_project())
    assert authenticate_api_key(raw) is not None
    caches["default"].delete(keycache.EPOCH_KEY)
    again, queries = key_queries(raw)
    assert again is not None
    assert queries >= 1


def test_an_expired_key_is_refused_from_the_cache_too():
    api_key, raw = make_api_key(make_project(), name="short")
    assert authenticate_api_key(raw) is not None
    ApiKey.objects.filter(pk=api_key.pk).update(expires_at=timezone.now())
    keycache._new_epoch()
    assert authenticate_api_key(raw) is None


def test_the_confirmation_counts_the_rate_limit_in_the_same_round_trip():
    _, raw = make_api_key(make_project())
    count_key = ("ratelimit-test:keycache", 120)
    caches["default"].delete(count_key[0])
    _, uncounted = authenticate_api_key_counted(raw, count=count_key)  # read from the database
    _, first = authenticate_api_key_counted(raw, count=count_key)
    _, second = authenticate_api_key_counted(raw, count=count_key)
    assert uncounted is None  # the throttle counts that one itself
    assert (first, second) == (1, 2)


@override_settings(SWITCHBOARD_API_KEY_CACHE_SECONDS=0)
def test_a_zero_bound_turns_the_cache_off():
    _, raw = make_api_key(make_project())
    assert authenticate_api_key(raw) is not None
    again, queries = key_queries(raw)
    assert again is not None
    assert queries >= 1
