"""core/cache.py: one Redis connection pool per process, and add-and-count in one round trip."""

import contextvars
import uuid

import pytest
from django.core.cache import caches

from core.cache import SharedPoolRedisCache, add_and_incr

pytestmark = pytest.mark.requires_redis("the Redis cache backend")


def backend_in_a_new_context() -> SharedPoolRedisCache:
    # Django's `caches` is context-local: a request's fresh context gets a fresh backend.
    return contextvars.Context().run(lambda: caches["default"])


def test_backends_of_different_requests_share_one_pool():
    first, second = backend_in_a_new_context(), backend_in_a_new_context()
    if not isinstance(first, SharedPoolRedisCache):
        pytest.skip("no Redis cache configured for this run")
    assert first is not second  # two requests, two backend objects …
    pool = first._cache._get_connection_pool(write=True)
    assert second._cache._get_connection_pool(write=True) is pool  # … one pool
    key = f"pool-{uuid.uuid4().hex}"
    for backend in (first, second):
        backend.set(key, 1, 30)
    # The second request reused the first one's connection rather than opening its own.
    assert len(pool._available_connections) + len(pool._in_use_connections) == 1
    first.delete(key)


def test_add_and_incr_counts_from_one_and_sets_the_expiry():
    backend = caches["default"]
    key = f"count-{uuid.uuid4().hex}"
    try:
        assert [add_and_incr(backend, key, 30) for _ in range(3)] == [1, 2, 3]
        assert backend.get(key) == 3
        if isinstance(backend, SharedPoolRedisCache):
            client = backend._cache.get_client(write=True)
            ttl = client.ttl(backend.make_and_validate_key(key))
            assert 0 < ttl <= 30
    finally:
        backend.delete(key)
