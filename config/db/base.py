"""Django's PostgreSQL backend, with a pool that answers at once when the server is unreachable.

psycopg's pool, asked for a connection it does not have, waits up to its `timeout` (10 s here)
for one. When PostgreSQL is stopped or restarting, its connection attempts fail, and every
request would wait out those 10 s before its 503: clients pile up, and the server's workers with
them. `FailFastPool` remembers that its last attempt to connect failed; meanwhile a request
makes one attempt of its own (refused at once by a stopped server, `PROBE_TIMEOUT` at most for
one that does not answer) and fails with it, and the requests waiting in the pool are woken with
the same error. The first attempt that succeeds puts the pool back to normal: its connection
joins the pool, the idle connections from before the outage are checked (and replaced), so
service resumes with the database, without waiting for the pool's reconnection back-off (which
grows to minutes) and without restarting the server.

`ENGINE = "config.db"` in settings; everything else is Django's backend unchanged.
"""

import logging
import threading
from typing import Any

import psycopg
from django.core.exceptions import ImproperlyConfigured
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool

logger = logging.getLogger(__name__)


class DatabaseUnreachable(psycopg.OperationalError):
    """The pool's server cannot be reached now (Django raises it as OperationalError)."""


class FailFastPool(ConnectionPool):
    # Seconds one attempt to connect may take (psycopg's minimum: it rounds up to 2).
    PROBE_TIMEOUT = 2.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._unreachable: Exception | None = None  # the last attempt's error, while it lasts
        self._probe_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def _connect(self, timeout: float | None = None) -> Any:
        try:
            conn = super()._connect(timeout)
        except psycopg.Error as error:
            self._mark_unreachable(error)
            raise
        self._unreachable = None
        return conn

    def _mark_unreachable(self, error: Exception) -> None:
        self._unreachable = error
        failure = DatabaseUnreachable(f"the database is unreachable: {error}")
        with self._lock:
            waiting = list(self._waiting)
            self._waiting.clear()
        for client in waiting:
            client.fail(failure)

    def getconn(self, timeout: float | None = None) -> Any:
        if self._unreachable is not None:
            self._probe()
        return super().getconn(timeout)

    def _probe(self) -> None:
        """One attempt to connect: raise DatabaseUnreachable, or put the pool back to normal."""
        with self._probe_lock:
            if self._unreachable is None:  # another request found it back meanwhile
                return
            try:
                conn = self._connect(self.PROBE_TIMEOUT)
            except psycopg.Error as error:
                raise DatabaseUnreachable(f"the database is unreachable: {error}") from error
            logger.warning("database reachable again: the pool resumes")
            # The idle connections from before the outage are dead: check (and replace) them.
            self.check()
            with self._lock:
                keep = self._nconns < self.max_size
                if keep:
                    self._nconns += 1
            if keep:
                self._add_to_pool(conn)
            else:
                conn.close()


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> ConnectionPool | None:
        # Django's own property (django/db/backends/postgresql/base.py), building a FailFastPool.
        pool_options = self.settings_dict["OPTIONS"].get("pool")
        if self.alias == base.NO_DB_ALIAS or not pool_options:
            return None
        if self.alias not in self._connection_pools:
            if self.settings_dict.get("CONN_MAX_AGE", 0) != 0:
                raise ImproperlyConfigured("Pooling doesn't support persistent connections.")
            if pool_options is True:
                pool_options = {}
            connect_kwargs = self.get_connection_params()
            connect_kwargs["autocommit"] = True
            enable_checks = self.settings_dict["CONN_HEALTH_CHECKS"]
            pool = FailFastPool(
                kwargs=connect_kwargs,
                open=False,
                configure=self._configure_connection,
                check=ConnectionPool.check_connection if enable_checks else None,
                **pool_options,
            )
            self._connection_pools.setdefault(self.alias, pool)
        return self._connection_pools[self.alias]
