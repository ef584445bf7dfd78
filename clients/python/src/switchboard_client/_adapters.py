"""What the framework adapters (openai_agents, langgraph, adk) share: the client they talk
through and the namespace of the external ids they make.

Every adapter is built as `Adapter(client=None, *, namespace="")`: `client` is a Client or an
AsyncClient (the adapter makes the other flavour it needs from the same URL and key), or None
for one made from SWITCHBOARD_URL and SWITCHBOARD_API_KEY; `namespace` prefixes every external
id the adapter makes, so several applications (or test runs) share one project without their
threads colliding.

A thread id / session id written `switchboard:<session id>` (session_reference) names a
Switchboard session directly, whatever its external_id: a fork made in the dashboard has none,
and its page shows this name for the framework to continue it.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from ._async_client import AsyncClient
from ._sync_client import Client
from .errors import PayloadTooLarge


def sync_client(client: Client | AsyncClient | None) -> Client:
    """`client` if it is a Client; else one on the same server with the same key and policy."""
    if isinstance(client, Client):
        return client
    if isinstance(client, AsyncClient):
        return Client(client.url, client.api_key, timeout=client.timeout, retry=client.retry)
    return Client()


def async_client(client: Client | AsyncClient | None) -> AsyncClient:
    """`client` if it is an AsyncClient; else one on the same server with the same key."""
    if isinstance(client, AsyncClient):
        return client
    if isinstance(client, Client):
        return AsyncClient(client.url, client.api_key, timeout=client.timeout, retry=client.retry)
    return AsyncClient()


def namespaced(namespace: str, name: str) -> str:
    """The external id an adapter gives `name` (a thread id, a session id) in `namespace`."""
    return f"{namespace}{name}"


# The prefix of a framework's thread / session id that names a Switchboard session by its id.
SESSION_PREFIX = "switchboard:"


def session_reference(name: str) -> str | None:
    """The Switchboard session id that `name` names directly (`switchboard:<session id>`, as a
    dashboard fork's page shows it), or None for an ordinary thread / session id."""
    if not name.startswith(SESSION_PREFIX):
        return None
    try:
        return str(uuid.UUID(name[len(SESSION_PREFIX) :]))
    except ValueError:
        return None


# --- What does not fit one event (openai_agents, adk) --------------------------------------------
#
# The server's default SWITCHBOARD_MAX_EVENT_BYTES, the most content an event may have. The API
# does not say the server's setting, so an adapter assumes the default; a server set lower
# refuses the append naming its limit (413, detail.limit), and the adapter uses that from then
# on, storing in blobs what is over it and appending again.
DEFAULT_EVENT_BYTES = 256 * 1024
# Characters of each field the event of an item kept in blobs shows.
PREVIEW_CHARS = 2000


def content_bytes(content: Any) -> int:
    """An event content's size as the server counts it against its limit: compact JSON with
    every non-ASCII character escaped."""
    return len(json.dumps(content, separators=(",", ":")))


def refused_limit(error: PayloadTooLarge) -> int | None:
    """The event limit a refusal names (detail: index, limit, size); None for a body refused
    whole (no index) or an answer without it."""
    detail = error.detail if isinstance(error.detail, dict) else {}
    limit = detail.get("limit")
    return limit if "index" in detail and isinstance(limit, int) else None


def preview(value: Any, size: int, what: str) -> Any:
    """A field of `what` (an item, an event) kept in blobs, as its Switchboard event shows it:
    cut to its first PREVIEW_CHARS characters (as JSON text, when not a string), saying where
    the rest is."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) <= PREVIEW_CHARS:
        return value
    return f"{text[:PREVIEW_CHARS]}… [cut: the whole {what}, {size} bytes, is in the blobs]"
