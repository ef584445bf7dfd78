"""Python client of the Switchboard agent API: `Client` (sync) and `AsyncClient` (asyncio),
both on httpx. It talks HTTP only and imports nothing of the server.

    from switchboard_client import Client

    with Client() as sb:  # SWITCHBOARD_URL, SWITCHBOARD_API_KEY
        session = sb.open_session("support-bot", external_id="ticket-42")
        sb.append(session.id, [{"kind": "message", "role": "user", "content": {"text": "Hi"}}])
"""

from . import models  # noqa: E402
from ._async_client import AsyncClient, AsyncExport  # noqa: E402
from ._core import RetryPolicy  # noqa: E402
from ._sync_client import Client, Export  # noqa: E402
from ._version import __version__ as __version__  # noqa: E402
from .errors import (  # noqa: E402
    BadRequest,
    ConfigurationError,
    Conflict,
    Forbidden,
    Gone,
    InvalidInput,
    NetworkError,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ResponseError,
    SwitchboardError,
    Unauthorized,
    Unavailable,
)

__all__ = [
    "AsyncClient",
    "AsyncExport",
    "BadRequest",
    "Client",
    "ConfigurationError",
    "Conflict",
    "Export",
    "Forbidden",
    "Gone",
    "InvalidInput",
    "NetworkError",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "ResponseError",
    "RetryPolicy",
    "SwitchboardError",
    "Unauthorized",
    "Unavailable",
    "models",
]
