"""Django's Redis cache with one connection pool per process, not one per request.

Django builds a cache backend per asgiref context (`caches` is a context-local handler), and
a request runs in a fresh context under both its ASGI handler and a2wsgi: with the stock
backend every request builds a new redis-py pool and opens a new connection (a connect, a
HELLO and a CLIENT SETINFO, about 40% of a single-event append's server time). The client,
and with it the pool, is shared here by every instance with the same servers and options;
redis-py's pool is thread-safe and reopens its connections after a fork.

The stock client also builds a new `redis.Redis` for every call (`get_client`), and building
one copies redis-py's table of response callbacks into a new case-insensitive dict: 6% of a
single-event append's server samples (py-spy, bench/api_ab.py --profile single). A
`redis.Redis` holds no connection of its own (it takes one from the pool per command), so one
per pool serves every thread.
"""

import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.utils.functional import cached_property

_clients: dict[tuple[tuple[str, ...], str], RedisCacheClient] = {}
_lock = threading.Lock()


# GET KEYS[1]; with KEYS[2]: SET KEYS[2] 0 EX ARGV[1] NX, INCR KEYS[2]. A missing value is
# Lua's false, which Redis answers as nil.
_READ_AND_COUNT = """
local value = redis.call('GET', KEYS[1])
if #KEYS == 1 then return {value} end
redis.call('SET', KEYS[2], 0, 'EX', ARGV[1], 'NX')
return {value, redis.call('INCR', KEYS[2])}
"""


class SharedClientRedisCacheClient(RedisCacheClient):
    """Django's Redis cache client, with one `redis.Redis` per connection pool."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._redis_by_pool: dict[int, Any] = {}
        self._scripts: dict[int, Any] = {}

    def read_and_count_script(self, client: Any) -> Any:
        """The read-and-count script bound to `client` (redis-py runs it by its digest and
        loads it again wherever Redis has lost it: a restart, SCRIPT FLUSH)."""
        script = self._scripts.get(id(client))
        if script is None:
            script = self._scripts[id(client)] = client.register_script(_READ_AND_COUNT)
        return script

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        pool = self._get_connection_pool(write)
        client = self._redis_by_pool.get(id(pool))
        if client is None:
            # Two threads may both build one here; either serves (the pool is the same).
            client = self._redis_by_pool[id(pool)] = self._client(connection_pool=pool)
        return client


class SharedPoolRedisCache(RedisCache):
    @cached_property
    def _cache(self) -> RedisCacheClient:
        key = (tuple(self._servers), repr(sorted(self._options.items())))
        client = _clients.get(key)
        if client is None:
            with _lock:
                client = _clients.get(key)
                if client is None:
                    client = _clients[key] = SharedClientRedisCacheClient(
                        self._servers, **self._options
                    )
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
        count, in one round trip (core.keycache: a key's confirmation rides on its count).

        One command (a script run by its digest), not a pipeline of three: a third less of the
        client's CPU for the check every API request makes (packing, sending and parsing one
        command instead of three)."""
        keys = [self.make_and_validate_key(read_key)]
        if count_key is not None:
            keys.append(self.make_and_validate_key(count_key))
        client = self._cache.get_client(keys[0], write=True)
        script = self._cache.read_and_count_script(client)
        replies = script(keys=keys, args=[timeout])
        return replies[0], (int(replies[1]) if count_key is not None else None)

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
