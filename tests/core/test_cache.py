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


def test_calls_share_one_redis_client_per_pool():
    first, second = backend_in_a_new_context(), backend_in_a_new_context()
    if not isinstance(first, SharedPoolRedisCache):
        pytest.skip("no Redis cache configured for this run")
    client = first._cache.get_client(write=True)
    # Another call, another request's backend: the same client object, on the same pool.
    assert second._cache.get_client(write=True) is client
    assert client.connection_pool is first._cache._get_connection_pool(write=True)
    key = f"client-{uuid.uuid4().hex}"
    try:
        second.set(key, "shared", 30)
        assert first.get(key) == "shared"
    finally:
        first.delete(key)


def test_read_and_count_reads_counts_and_survives_a_script_flush():
    backend = caches["default"]
    if not isinstance(backend, SharedPoolRedisCache):
        pytest.skip("no Redis cache configured for this run")
    read_key, count_key = f"read-{uuid.uuid4().hex}", f"count-{uuid.uuid4().hex}"
    client = backend._cache.get_client(write=True)
    try:
        # Nothing stored yet: None, and the count starts at one with the given expiry.
        assert backend.read_and_count(read_key, count_key, 30) == (None, 1)
        assert 0 < client.ttl(backend.make_and_validate_key(count_key)) <= 30
        backend.set_raw(read_key, "epoch-1")
        assert backend.read_and_count(read_key, count_key, 30) == (b"epoch-1", 2)
        # Redis lost its scripts (a restart, SCRIPT FLUSH): the next call loads it again.
        client.script_flush()
        assert backend.read_and_count(read_key, count_key, 30) == (b"epoch-1", 3)
        assert backend.read_and_count(read_key) == (b"epoch-1", None)
        assert add_and_incr(backend, count_key, 30) == 4  # the same counter as the API throttle's
    finally:
        backend.delete(read_key)
        backend.delete(count_key)
