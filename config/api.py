"""The agent API (v1): one NinjaAPI, API-key auth, one error shape for every failure."""

import functools
import inspect
import logging
import math
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, DataError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, Throttled, ValidationError
from ninja.openapi.schema import OpenAPISchema
from ninja.operation import Operation
from ninja.parser import Parser
from ninja.security import APIKeyQuery
from ninja.throttling import BaseThrottle

from core import ratelimit
from core.errors import DomainError, NotFound
from core.http import error_response
from core.models import ApiKey
from core.outage import OutageLog
from core.ratelimit import RateBucket
from core.schemas import QUERY_PREFIXES
from core.scopes import ApiKeyAuth
from core.text import loads_client_json
from sessions_app.access import missing_session_error
from tasks_app.api import SignalGrant

logger = logging.getLogger(__name__)


def rate_bucket(auth: object) -> RateBucket | None:
    """Whose count a request goes to: its API key's, or for a signal token its task's own (a
    webhook sender's traffic neither spends the agents' budget nor shares one across tasks)."""
    if isinstance(auth, ApiKey):
        return ratelimit.api_key_bucket(auth.prefix)
    if isinstance(auth, SignalGrant):
        rate = settings.SWITCHBOARD_SIGNAL_RATE_PER_MINUTE
        name = f"signal-task:{auth.task.pk}"
        return RateBucket(name, rate, "this task's signal token") if rate > 0 else None
    return None  # unauthenticated requests are refused by auth, not counted here


class ApiKeyRateThrottle(BaseThrottle):
    """At most the bucket's limit of requests in each clock minute (core/ratelimit.py).

    A fixed window counted with the cache's atomic incr (Redis INCR in production), so several
    server processes share one count; ninja's SimpleRateThrottle reads, edits and writes back
    a list, which loses counts when requests of one key arrive together. The rate is read per
    request, so settings apply without rebuilding the API. The window is left on the request
    for RateLimitHeadersMiddleware (config/middleware.py) and the 429 handler.

    A limiter that cannot count lets the request through: with the cache down, refusing (or
    failing: ninja runs throttles outside its exception handlers) would take the whole API down
    with it. The outage is logged once (core.outage), not per request.
    """

    outage = OutageLog(logger, "API rate limit store (cache)")

    def allow_request(self, request: HttpRequest) -> bool:
        bucket = rate_bucket(getattr(request, "auth", None))
        if bucket is None:
            return True
        counted = getattr(request, "rate_limit_counted", None)
        if counted is not None and counted[0] == bucket.name:
            window = counted[1]  # counted with the key's confirmation (core.keycache)
        else:
            try:
                window = ratelimit.hit(bucket.name, bucket.limit)
            except Exception as exc:
                self.outage.failed(exc)
                return True
            self.outage.succeeded()
        request.rate_limit = window  # type: ignore[attr-defined]
        request.rate_limit_subject = bucket.subject  # type: ignore[attr-defined]
        self.retry_after = window.reset
        return not window.exceeded

    def wait(self) -> float:
        return self.retry_after


class SwitchboardAPI(NinjaAPI):
    """NinjaAPI, with the OpenAPI schema built once per process (per path prefix).

    ninja builds it from every operation and schema on each request to /openapi.json (about
    1.5 s of CPU here); the operations are fixed once the URLconf is loaded, so one build per
    process is the same document. The schema is shared: callers must not change it.
    """

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> OpenAPISchema:
        if path_prefix is None:
            path_prefix = self.get_root_path(path_params or {})
        cache: dict[str, OpenAPISchema] = self.__dict__.setdefault("_openapi_schemas", {})
        schema = cache.get(path_prefix)
        if schema is None:
            with _openapi_lock:  # one build at a time; the others then read it
                schema = cache.get(path_prefix)
                if schema is None:
                    schema = cache[path_prefix] = super().get_openapi_schema(
                        path_prefix=path_prefix
                    )
        return schema


_openapi_lock = threading.Lock()


class BodyParser(Parser):
    """JSON bodies, where what Python's parser cannot take (nesting past its recursion limit,
    an integer past 4,300 digits) is a 422 naming the problem, not ninja's 400 "Cannot parse"
    for what is valid JSON. ninja wraps whatever the parser raises in that 400; http_error
    answers the domain error it wraps."""

    def parse_body(self, request: HttpRequest) -> Any:
        return loads_client_json(request.body, field="body")


def declared_query_names(operation: Operation) -> frozenset[str]:
    """The query parameters `operation` takes: those its signature declares (each field of a
    Query schema, under its alias) and a query-string credential of its own auth (the signal
    endpoint's `signal_token`). The OpenAPI document lists the same: its parameters and its
    security schemes `in: query`."""
    names = {
        name
        for model in operation.models
        if model.__ninja_param_source__ == "query"
        for name in model.__ninja_flatten_map__
    }
    names.update(cb.param_name for cb in operation.auth_callbacks if isinstance(cb, APIKeyQuery))
    return frozenset(names)


def declared_query_prefixes(operation: Operation) -> tuple[str, ...]:
    """The prefixes of the query parameters `operation` names by the client's choice (GET
    /sessions' `metadata.<name>`), as its OpenAPI operation lists them (core.schemas.
    query_prefixes): the view reads and checks those itself."""
    return tuple((operation.openapi_extra or {}).get(QUERY_PREFIXES, ()))


UNKNOWN_QUERY_MSG = "Extra inputs are not permitted"  # pydantic's words for a body's extras


def _refuse_unknown(request: HttpRequest, known: frozenset[str], prefixes: tuple[str, ...]) -> None:
    unknown = [
        name
        for name in request.GET
        if name not in known and not (prefixes and name.startswith(prefixes))
    ]
    if unknown:
        raise ValidationError(
            [
                {"type": "extra_forbidden", "loc": ["query", name], "msg": UNKNOWN_QUERY_MSG}
                for name in unknown
            ]
        )


def refuse_unknown_query_parameters(view_func: Callable[..., Any]) -> Callable[..., Any]:
    """An operation's view, refusing a query parameter the operation does not declare with 422
    naming it (`extra_forbidden`, as a body's unknown field), never ignoring it: ninja reads
    only the names it declares, so a misspelt `limt=5` was a page of the default size.

    Every operation gets it (`api.add_decorator(..., mode="operation")`, ninja's hook for
    this): ninja calls the view after authentication, the rate limit and the validation of the
    declared parameters and the body, inside its exception handlers. So a bad key is still a
    401 that says nothing about the parameters (a key below the scope a 403), a bad declared
    value is reported first, and nothing has changed. Not a Query schema with extra="forbid"
    (ninja builds it from request.GET filtered to the declared names, and an operation without
    query parameters has none), not in ApiKeyAuth (the signal endpoint and the long-poll
    authenticate otherwise).

    The names are those of the operation as its router declared it (`_ninja_operation`): its
    parameters, and the auth it names itself; a router's or the API's default auth
    (ApiKeyAuth) is a header. And any name after a prefix the operation declares
    (declared_query_prefixes): `metadata.<name>` of GET /sessions. A request without a query
    string (the append's) costs one dictionary look-up.
    """
    operation = view_func._ninja_operation  # type: ignore[attr-defined]
    known = declared_query_names(operation)
    prefixes = declared_query_prefixes(operation)

    if inspect.iscoroutinefunction(view_func):

        @functools.wraps(view_func)
        async def checked_async(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            if request.META.get("QUERY_STRING"):
                _refuse_unknown(request, known, prefixes)
            return await view_func(request, *args, **kwargs)

        return checked_async

    @functools.wraps(view_func)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if request.META.get("QUERY_STRING"):
            _refuse_unknown(request, known, prefixes)
        return view_func(request, *args, **kwargs)

    return checked


api = SwitchboardAPI(
    title="Switchboard agent API",
    version="1",
    description=(
        "Sessions (append-only event logs) and tasks (workflow state) for AI agents. A body "
        "field or query parameter an operation does not declare is refused (422)."
    ),
    auth=ApiKeyAuth(),
    parser=BodyParser(),
    throttle=[ApiKeyRateThrottle()],
    urls_namespace="api",
    docs_url="/docs",
    openapi_url="/openapi.json",
)


@api.exception_handler(DomainError)
def domain_error(request: HttpRequest, exc: DomainError) -> HttpResponse:
    auth = getattr(request, "auth", None)
    if isinstance(exc, NotFound) and isinstance(auth, ApiKey) and isinstance(exc.detail, dict):
        # A session that went while the request waited (an erasure won the race with an
        # append or a fork): the same answer as a look-up that comes after it (410 erased).
        session_id = exc.detail.get("session_id")
        if session_id:
            exc = missing_session_error(session_id, auth.project_id)
    response = error_response(exc.status, exc.code, exc.message, exc.detail)
    if exc.retry_after is not None:
        response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(ValidationError)
def validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    errors = [
        {k: v for k, v in error.items() if k in {"type", "loc", "msg"}} for error in exc.errors
    ]
    return error_response(422, "invalid_input", "The request did not validate.", errors)


@api.exception_handler(AuthenticationError)
def authentication_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return error_response(
        401, "unauthorized", "Send a valid API key as 'Authorization: Bearer <key>'."
    )


@api.exception_handler(Throttled)
def throttled(request: HttpRequest, exc: Throttled) -> HttpResponse:
    retry_after = math.ceil(exc.wait or 0)
    subject = getattr(request, "rate_limit_subject", "this API key")
    response = error_response(
        429, "rate_limited", f"Too many requests for {subject}.", {"retry_after": retry_after}
    )
    if exc.wait:
        response["Retry-After"] = str(math.ceil(exc.wait))
    return response


@api.exception_handler(HttpError)
def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if isinstance(exc.__cause__, DomainError):
        return domain_error(request, exc.__cause__)  # BodyParser's refusal
    codes = {
        400: "bad_request",
        403: "forbidden",
        404: "not_found",
        405: "method_not_allowed",
        409: "conflict",
        413: "payload_too_large",
        422: "invalid_input",
    }
    return error_response(exc.status_code, codes.get(exc.status_code, "http_error"), str(exc))


@api.exception_handler(Http404)
def not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return error_response(404, "not_found", "Not found.")


@api.exception_handler(RequestDataTooBig)
def too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return error_response(413, "payload_too_large", "The request body is too large.")


@api.exception_handler(Exception)
def unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    if isinstance(exc, (OperationalError, InterfaceError)):
        logger.warning("database unavailable: %s", exc)
        return error_response(503, "unavailable", "The database is unavailable; retry shortly.")
    if isinstance(exc, DataError | UnicodeEncodeError):
        # A value the column cannot hold that the schemas let through: retrying cannot help, so
        # it is the client's mistake (422), not an outage (503) that invites retries. The
        # database's words (SQL, table and column names) go to the log, not to the client.
        logger.info("value refused by the database: %s", exc)
        return error_response(
            422,
            "invalid_input",
            "A value in the request cannot be stored (a number out of range, or text holding "
            "a NUL character or a lone surrogate).",
        )
    if isinstance(exc, DatabaseError):
        logger.exception("database error")
        return error_response(503, "unavailable", "The database refused the request; retry.")
    logger.exception("unhandled API error")
    return error_response(500, "internal_error", "Something went wrong on our side.")


api.add_decorator(refuse_unknown_query_parameters, mode="operation")
api.add_router("/", "core.api.router")
api.add_router("/", "switchboard.api.router")
api.add_router("/", "sessions_app.api.router")
api.add_router("/", "sessions_app.blob_api.router")
api.add_router("/", "sessions_app.artifact_api.router")
api.add_router("/", "tasks_app.api.router")
api.add_router("/", "handoffs_app.api.router")
api.add_router("/", "retention_app.api.router")
api.add_router("/", "retention_app.erasure_api.router")
