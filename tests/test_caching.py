"""tests.caching.clear_cache empties this run's cache keys and nothing else of the Redis
database that suites running side by side share (RedisCache.clear() would FLUSHDB it)."""

import uuid

import pytest
from django.core.cache import cache, caches
from django.core.cache.backends.redis import RedisCache

from tests.caching import clear_cache


@pytest.mark.requires_redis("clearing only this run's keys of a shared Redis database")
def test_it_clears_this_runs_keys_and_leaves_the_rest_of_the_database():
    backend = caches["default"]
    assert isinstance(backend, RedisCache), backend
    client = backend._cache.get_client(write=True)
    foreign = f"another-suite-{uuid.uuid4().hex}:1:chart"  # another run's prefix, same database
    client.set(foreign, b"theirs", ex=60)
    cache.set("chart", "ours", 60)
    cache.set("other", "ours too", 60)
    try:
        clear_cache()
        assert cache.get("chart") is None and cache.get("other") is None
        assert client.get(foreign) == b"theirs"
    finally:
        client.delete(foreign)
