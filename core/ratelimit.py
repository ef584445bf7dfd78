"""Fixed-window counters in the cache, shared by the API throttle and the sign-in throttle.

A window is a clock interval (`period` seconds, aligned to the epoch) with one counter key per
bucket, counted with the cache's atomic incr (Redis INCR in production), so every server
process shares one count. Fixed windows, not sliding ones: one INCR per request and nothing to
read back and rewrite, at the price of allowing up to twice the limit across a window boundary.
"""

import hashlib
import math
import time
from dataclasses import dataclass

from django.core.cache import cache


@dataclass(frozen=True)
class Window:
    """Where a bucket stands in the current window."""

    limit: int
    count: int
    reset: int  # whole seconds until the window ends (at least 1)

    @property
    def exceeded(self) -> bool:
        return self.count > self.limit

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.count)

    def headers(self) -> dict[str, str]:
        """The three fields of the IETF draft (draft-ietf-httpapi-ratelimit-headers)."""
        return {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(self.reset),
        }


def _counter(bucket: str, period: int) -> tuple[str, int]:
    now = time.time()
    reset = max(1, math.ceil(period - now % period))
    return f"rate:{bucket}:{period}:{int(now // period)}", reset


def hit(bucket: str, limit: int, period: int = 60) -> Window:
    """Count one request in `bucket`'s current window and say where it stands."""
    key, reset = _counter(bucket, period)
    # The key outlives its window a little, so a slow request still finds it; then it expires.
    cache.add(key, 0, timeout=period + 60)
    return Window(limit, cache.incr(key), reset)


def peek(bucket: str, limit: int, period: int = 60) -> Window:
    """Where `bucket` stands in the current window, counting nothing."""
    key, reset = _counter(bucket, period)
    return Window(limit, int(cache.get(key, 0)), reset)


def bucket_name(*parts: str) -> str:
    """A cache-safe bucket name for arbitrary input (usernames, addresses)."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:32]
