"""`SQLiteSession` for the SDK's own tests: a SwitchboardSession on the live test server, built
with SQLiteSession's arguments. The copied tests import it in place of the SDK's (refresh.py).

Stores map to namespaces, so the tests see SQLite's isolation: an in-memory database is a
store of its own (a fresh namespace per instance); a file path and its table names name a
store that every instance given them shares, within the test (the conftest sets a namespace
per test). `close()` releases nothing but the handle: there is no connection to close.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
import weakref
from pathlib import Path
from typing import Any

from switchboard_client import AsyncClient, RetryPolicy
from switchboard_client.openai_agents import SwitchboardSession


class _Store:
    """Where the current test's sessions live: the server, the key, the test's namespace."""

    url = ""
    api_key = ""
    namespace = ""
    built = 0  # sessions made since use()
    clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncClient]


_store = _Store()
_store.clients = weakref.WeakKeyDictionary()
_FAST = RetryPolicy(max_retries=2, backoff=0.05, max_backoff=0.2)


def use(url: str, api_key: str, namespace: str) -> None:
    _store.url, _store.api_key, _store.namespace = url, api_key, namespace
    _store.clients = weakref.WeakKeyDictionary()
    _store.built = 0


def built() -> int:
    """How many sessions the test made."""
    return _store.built


class SQLiteSession(SwitchboardSession):
    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
    ) -> None:
        if not _store.url:
            raise RuntimeError("the Switchboard shim is used outside the upstream tests")
        if str(db_path) == ":memory:":
            store = uuid.uuid4().hex
        else:
            where = f"{Path(db_path).expanduser().resolve()}|{sessions_table}|{messages_table}"
            store = hashlib.sha256(where.encode()).hexdigest()[:16]
        super().__init__(
            session_id,
            namespace=f"{_store.namespace}{store}/",
            session_settings=session_settings,
        )
        _store.built += 1
        self.db_path = db_path
        self.sessions_table = sessions_table
        self.messages_table = messages_table

    def _client(self) -> AsyncClient:
        """One AsyncClient per event loop for all the test's sessions (anyio runs each test
        in a loop of its own; some tests add items from a second loop)."""
        loop = asyncio.get_running_loop()
        client = _store.clients.get(loop)
        if client is None:
            client = AsyncClient(_store.url, _store.api_key, retry=_FAST)
            _store.clients[loop] = client
        return client

    def close(self) -> None:
        pass
