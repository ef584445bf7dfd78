"""Fixed-window counters in the cache, shared by the API throttle and the sign-in throttle.

A window is a clock interval (`period` seconds, aligned to the epoch) with one counter key per
bucket, counted with the cache's atomic incr (Redis INCR in production), so every server
process shares one count. Fixed windows, not sliding ones: one INCR per request and nothing to
read back and rewrite, at the price of allowing up to twice the limit across a window boundary.
"""

import hashlib
import logging
import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from .cache import add_and_incr
from .outage import OutageLog

logger = logging.getLogger(__name__)
# With its store down the sign-in throttle lets sign-ins through (passwords are still checked):
# refusing every sign-in during a Redis outage would lock everyone out of the dashboard.
signin_outage = OutageLog(logger, "sign-in throttle store (cache)")


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


@dataclass(frozen=True)
class RateBucket:
    name: str
    limit: int
    subject: str  # named in the 429 message


def api_key_bucket(prefix: str) -> RateBucket | None:
    """The API throttle's bucket of the key with this prefix (None: no limit is set)."""
    rate = settings.SWITCHBOARD_API_RATE_PER_MINUTE
    return RateBucket(f"api-key:{prefix}", rate, "this API key") if rate > 0 else None


API_PERIOD = 60  # the API throttle counts per clock minute


def counter(bucket: str, period: int) -> tuple[str, int, int]:
    """(cache key of `bucket`'s current window, seconds until it ends, the key's timeout)."""
    key, reset = _counter(bucket, period)
    # The key outlives its window a little, so a slow request still finds it; then it expires.
    return key, reset, period + 60


def _counter(bucket: str, period: int) -> tuple[str, int]:
    now = time.time()
    reset = max(1, math.ceil(period - now % period))
    return f"rate:{bucket}:{period}:{int(now // period)}", reset


def hit(bucket: str, limit: int, period: int = 60) -> Window:
    """Count one request in `bucket`'s current window and say where it stands."""
    key, reset, timeout = counter(bucket, period)
    return Window(limit, add_and_incr(cache, key, timeout), reset)


def peek(bucket: str, limit: int, period: int = 60) -> Window:
    """Where `bucket` stands in the current window, counting nothing."""
    key, reset = _counter(bucket, period)
    return Window(limit, int(cache.get(key, 0)), reset)


def forget(bucket: str, period: int = 60) -> None:
    """Drop `bucket`'s count in the current window."""
    cache.delete(_counter(bucket, period)[0])


def _digest(value: str) -> str:
    """A cache-safe bucket name for arbitrary input (usernames, addresses)."""
    return hashlib.sha256(value.encode()).hexdigest()[:32]


# --- Dashboard sign-in ------------------------------------------------------------------------
# Failed sign-ins are counted per account and per client address (only failures: a team behind
# one address signs in as often as it likes); at the limit the sign-in refuses, without checking
# the password, until the window ends.


@dataclass(frozen=True)
class Lockout:
    scope: str  # "account" or "address"
    retry_after: int  # seconds until the window ends


def _signin_buckets(username: str, address: str) -> list[tuple[str, str, int]]:
    return [
        (
            "account",
            # Case-folded: varying the case of a name must not buy fresh attempts.
            f"signin-account:{_digest(username.casefold())}",
            settings.SWITCHBOARD_LOGIN_FAILURES_PER_ACCOUNT,
        ),
        (
            "address",
            f"signin-address:{_digest(address)}",
            settings.SWITCHBOARD_LOGIN_FAILURES_PER_ADDRESS,
        ),
    ]


def signin_lockout(username: str, address: str) -> Lockout | None:
    """Why a sign-in for `username` from `address` is refused now, or None if it may proceed."""
    period = settings.SWITCHBOARD_LOGIN_WINDOW_SECONDS
    try:
        for scope, bucket, limit in _signin_buckets(username, address):
            if limit > 0:
                window = peek(bucket, limit, period)
                if window.count >= limit:
                    return Lockout(scope, window.reset)
    except Exception as exc:
        signin_outage.failed(exc)
        return None
    signin_outage.succeeded()
    return None


def record_signin_failure(username: str, address: str) -> None:
    period = settings.SWITCHBOARD_LOGIN_WINDOW_SECONDS
    try:
        for _scope, bucket, limit in _signin_buckets(username, address):
            if limit > 0:
                hit(bucket, limit, period)
    except Exception as exc:
        signin_outage.failed(exc)


def forget_signin_failures(username: str) -> None:
    """After a successful sign-in the account starts afresh (the address count stays)."""
    period = settings.SWITCHBOARD_LOGIN_WINDOW_SECONDS
    _scope, account_bucket, _limit = _signin_buckets(username, "")[0]
    try:
        forget(account_bucket, period)
    except Exception as exc:
        signin_outage.failed(exc)
