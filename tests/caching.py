"""Emptying this run's cache, and only this run's.

Django's RedisCache.clear() is FLUSHDB: it empties the whole Redis database, which suites
running side by side on one server share with this one (tests/settings.py gives each run its
own cache-key and channel prefix, not its own database), and which also holds their channel
layer groups and queued messages and their Celery queues. Flushing it loses live messages and
queued jobs of whatever else is running, so tests clear only the keys of their own prefix.
"""

import re

from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache


def clear_cache(alias: str = "default") -> None:
    backend = caches[alias]
    if not isinstance(backend, RedisCache):
        backend.clear()  # per-process (locmem): nobody else's
        return
    client = backend._cache.get_client(write=True)
    # Keys are "<KEY_PREFIX>:<version>:<key>" (django.core.cache.backends.base.default_key_func).
    pattern = re.sub(r"([\\*?\[\]])", r"\\\1", backend.key_prefix) + ":*"
    keys = list(client.scan_iter(match=pattern, count=1000))
    if keys:
        client.delete(*keys)
