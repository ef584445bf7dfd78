"""API keys this process has authenticated, confirmed on every request with one Redis read.

Looking a key up in PostgreSQL was a round trip of every API request (a fifth of a single-event
append). Here a process keeps what it read (the key's and its project's columns, never the
secret: its SHA-256, as stored) and trusts it only after the request has confirmed, in Redis,
that the keys' *epoch* is still the one the entry was read under. Every change to a key or a
project (revocation, and any save or delete: `key_changed`, `project_changed`) draws a new
random epoch after it commits, so the next request on every process finds its entry stale and
reads the database again: a revoked key is refused at its next request wherever it lands, as
before. The confirmation rides in the same Redis round trip as the rate limit's count (one
pipeline: GET epoch, SET NX + INCR counter), so a cached key costs no round trip at all beyond
the one the rate limit made anyway.

Bounds:
- Redis unreachable: nothing is trusted (every request reads the database, as before) and the
  process drops its entries, so none filled before the outage outlives a change made during it.
- A change whose new epoch never reaches Redis (Redis down at that very moment, or a key edited
  in SQL outside the services) is seen within SWITCHBOARD_API_KEY_CACHE_SECONDS (default 10)
  by the processes that had the key: no entry is trusted longer than that.
- Without Redis (the embedded default's per-process cache) nothing is cached: there is no store
  the processes share.
The entry is read under the epoch read *before* the database look-up, so a change committed
between the two is never filed under its own new epoch.
"""

import hmac
import logging
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.db import connection, transaction
from django.db.models.signals import post_delete, post_save

from .cache import SharedPoolRedisCache
from .models import ApiKey, Project
from .outage import OutageLog

logger = logging.getLogger(__name__)
outage = OutageLog(logger, "API key cache epoch (Redis)")

EPOCH_KEY = "api-keys:epoch"

_KEY_FIELDS = [f.attname for f in ApiKey._meta.concrete_fields]
_PROJECT_FIELDS = [f.attname for f in Project._meta.concrete_fields]


@dataclass(frozen=True)
class Entry:
    hashed_secret: str
    key_values: tuple[Any, ...]
    project_values: tuple[Any, ...]
    epoch: bytes
    filled_at: float  # time.monotonic()

    def build(self) -> ApiKey:
        """A fresh ApiKey with its project (callers may change them: never shared)."""
        api_key = ApiKey.from_db(connection.alias, _KEY_FIELDS, list(self.key_values))
        api_key.project = Project.from_db(
            connection.alias, _PROJECT_FIELDS, list(self.project_values)
        )
        return api_key


_entries: dict[str, Entry] = {}
_lock = threading.Lock()


def _store() -> SharedPoolRedisCache | None:
    if settings.SWITCHBOARD_API_KEY_CACHE_SECONDS <= 0:
        return None
    backend = caches["default"]
    return backend if isinstance(backend, SharedPoolRedisCache) else None


def lookup(prefix: str, hashed_secret: str) -> Entry | None:
    """This process's entry for the key, if it holds the same secret and is young enough."""
    entry = _entries.get(prefix)
    if entry is None:
        return None
    if time.monotonic() - entry.filled_at >= settings.SWITCHBOARD_API_KEY_CACHE_SECONDS:
        _entries.pop(prefix, None)
        return None
    if not hmac.compare_digest(entry.hashed_secret, hashed_secret):
        return None
    return entry


def confirm(entry: Entry, count: tuple[str, int] | None) -> tuple[bool, int | None]:
    """Whether `entry` is still current, and (with `count`: a counter key and its timeout) the
    counter's new value, in one Redis round trip. Raises when Redis fails (the caller then
    reads the database); the process's entries are dropped then."""
    store = _store()
    if store is None:
        return False, None
    try:
        epoch, counted = store.read_and_count(
            EPOCH_KEY, count[0] if count else None, count[1] if count else 0
        )
    except Exception as exc:
        outage.failed(exc)
        forget_all()
        raise
    outage.succeeded()
    return epoch == entry.epoch, counted


def epoch_before_lookup() -> bytes | None:
    """The epoch to file a database look-up under, read before it (None: do not cache)."""
    store = _store()
    if store is None:
        return None
    try:
        epoch = store.set_raw(EPOCH_KEY, secrets.token_hex(8), only_if_absent=True)
    except Exception as exc:
        outage.failed(exc)
        forget_all()
        return None
    outage.succeeded()
    return epoch


def remember(prefix: str, api_key: ApiKey, epoch: bytes | None) -> None:
    if epoch is None:
        return
    _entries[prefix] = Entry(
        hashed_secret=api_key.hashed_secret,
        key_values=tuple(getattr(api_key, name) for name in _KEY_FIELDS),
        project_values=tuple(getattr(api_key.project, name) for name in _PROJECT_FIELDS),
        epoch=epoch,
        filled_at=time.monotonic(),
    )


def touched(prefix: str, last_used_at: Any) -> None:
    """The key's last_used_at was just written: keep the entry from writing it again."""
    entry = _entries.get(prefix)
    if entry is not None:
        values = list(entry.key_values)
        values[_KEY_FIELDS.index("last_used_at")] = last_used_at
        _entries[prefix] = Entry(
            entry.hashed_secret,
            tuple(values),
            entry.project_values,
            entry.epoch,
            entry.filled_at,
        )


def forget_all() -> None:
    with _lock:
        _entries.clear()


def _new_epoch() -> None:
    store = _store()
    if store is None:
        return
    try:
        store.set_raw(EPOCH_KEY, secrets.token_hex(8))
    except Exception:
        # The entries of other processes then live out SWITCHBOARD_API_KEY_CACHE_SECONDS.
        logger.exception("could not publish an API key change to the other server processes")


def keys_changed() -> None:
    """A key or project changed (or will when the transaction commits): this process forgets
    its entries now (its own later requests read the change), every process at its next
    request after the commit (a refill before the commit reads the old row under the old
    epoch, which the commit's new epoch then retires)."""
    forget_all()
    transaction.on_commit(_published)


def _published() -> None:
    forget_all()
    _new_epoch()


def _saved(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    if not created:  # a new key or project is in no process's cache yet
        keys_changed()


def _deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    keys_changed()


def connect_signals() -> None:
    """Saves and deletes through the ORM (the admin, the services' save()) retire the entries;
    the services' queryset updates (revocation) call keys_changed() themselves."""
    for model in (ApiKey, Project):
        post_save.connect(_saved, sender=model, dispatch_uid=f"keycache-save-{model.__name__}")
        post_delete.connect(
            _deleted, sender=model, dispatch_uid=f"keycache-delete-{model.__name__}"
        )
