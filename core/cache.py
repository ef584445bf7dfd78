"""Django's Redis cache with one connection pool per process, not one per request.

Django builds a cache backend per asgiref context (`caches` is a context-local handler), and
a request runs in a fresh context under both its ASGI handler and a2wsgi: with the stock
backend every request builds a new redis-py pool and opens a new connection (a connect, a
HELLO and a CLIENT SETINFO, about 40% of a single-event append's server time). The client,
and with it the pool, is shared here by every instance with the same servers and options;
redis-py's pool is thread-safe and reopens its connections after a fork.
"""

import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.utils.functional import cached_property

_clients: dict[tuple[tuple[str, ...], str], RedisCacheClient] = {}
_lock = threading.Lock()


class SharedPoolRedisCache(RedisCache):
    @cached_property
    def _cache(self) -> RedisCacheClient:
        key = (tuple(self._servers), repr(sorted(self._options.items())))
        client = _clients.get(key)
        if client is None:
            with _lock:
                client = _clients.get(key)
                if client is None:
                    client = _clients[key] = self._class(self._servers, **self._options)
        return client

    def add_and_incr(self, key: str, timeout: int) -> int:
        """`add(key, 0, timeout)` then `incr(key)` in one round trip: the new count."""
        key = self.make_and_validate_key(key)
        client = self._cache.get_client(key, write=True)
        pipe = client.pipeline(transaction=False)
        pipe.set(key, 0, ex=timeout, nx=True)
        pipe.incr(key)
        return int(pipe.execute()[1])

    def read_and_count(
        self, read_key: str, count_key: str | None = None, timeout: int = 0
    ) -> tuple[bytes | None, int | None]:
        """The raw value at `read_key`, and (with `count_key`) `add_and_incr(count_key)`'s
        count, in one round trip (core.keycache: a key's confirmation rides on its count)."""
        key = self.make_and_validate_key(read_key)
        client = self._cache.get_client(key, write=True)
        pipe = client.pipeline(transaction=False)
        pipe.get(key)
        if count_key is not None:
            counter = self.make_and_validate_key(count_key)
            pipe.set(counter, 0, ex=timeout, nx=True)
            pipe.incr(counter)
        replies = pipe.execute()
        return replies[0], (int(replies[2]) if count_key is not None else None)

    def set_raw(self, key: str, value: str, *, only_if_absent: bool = False) -> bytes | None:
        """Store `value` as is (no pickling, no expiry) and return what the key then holds."""
        key = self.make_and_validate_key(key)
        client = self._cache.get_client(key, write=True)
        pipe = client.pipeline(transaction=False)
        pipe.set(key, value, nx=only_if_absent)
        pipe.get(key)
        return pipe.execute()[1]  # type: ignore[no-any-return]


def add_and_incr(cache: Any, key: str, timeout: int) -> int:
    """Count one in `key` (created with `timeout` if absent) in any Django cache."""
    fast = getattr(cache, "add_and_incr", None)
    if fast is not None:
        return int(fast(key, timeout))
    cache.add(key, 0, timeout=timeout)
    return int(cache.incr(key))
