"""API key authentication with scopes: `agent` (every route: the default) and `admin` (the
project's settings, and the retention policy, holds and webhook endpoints as they arrive).

Every route authenticates with an `ApiKeyAuth`: the API's default is `ApiKeyAuth()` (agent);
a route that needs more says `auth=ApiKeyAuth(KeyScope.ADMIN)`. A valid key below the scope is
refused with 403 in the one error shape (the API's DomainError handler renders it) during
authentication, before the body is parsed or the rate limit counts it; an unknown, revoked or
expired key stays a 401. `route_scope(operation)` reads what a route needs, so tests can
enumerate every route with it.
"""

from typing import Any

from django.http import HttpRequest
from ninja.security import HttpBearer

from core import ratelimit
from core.errors import PermissionDeniedError
from core.models import ApiKey, KeyScope
from core.services.projects import KEY_PREFIX, authenticate_api_key_counted

DEFAULT_SCOPE = KeyScope.AGENT


def require_key_scope(api_key: ApiKey, minimum: str) -> None:
    """Raise PermissionDeniedError (403) unless `api_key` has at least `minimum`."""
    if not api_key.has_scope(minimum):
        raise PermissionDeniedError(
            f"This needs an API key with the {minimum} scope; this key's scope is "
            f"{api_key.scope}. A project admin can create an admin-scoped key.",
            detail={"required_scope": str(minimum), "scope": api_key.scope},
        )


class ApiKeyAuth(HttpBearer):
    """`Authorization: Bearer <API key>`, with at least `scope`."""

    def __init__(self, scope: str = DEFAULT_SCOPE) -> None:
        self.scope = KeyScope(scope)
        super().__init__()

    def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        # The rate limit's count rides on the cached key's confirmation (core.keycache): one
        # Redis round trip for both; config.api's throttle then uses the window counted here.
        prefix = token[len(KEY_PREFIX) :].partition("_")[0]
        bucket = ratelimit.api_key_bucket(prefix)
        count = None
        if bucket is not None:
            key, reset, timeout = ratelimit.counter(bucket.name, ratelimit.API_PERIOD)
            count = (key, timeout)
        api_key, counted = authenticate_api_key_counted(token, count=count, count_scope=self.scope)
        if bucket is not None and counted is not None:
            window = ratelimit.Window(bucket.limit, counted, reset)
            request.rate_limit_counted = (bucket.name, window)  # type: ignore[attr-defined]
        if api_key is not None:
            require_key_scope(api_key, self.scope)
        return api_key


def route_scope(operation: Any) -> str:
    """The key scope a ninja operation needs: the highest of its ApiKeyAuth callbacks (an
    operation with other credentials too, a task's signal token, is an agent route)."""
    scopes = [cb.scope for cb in operation.auth_callbacks if isinstance(cb, ApiKeyAuth)]
    return str(max(scopes, key=KeyScope.rank)) if scopes else str(DEFAULT_SCOPE)
