"""What the sync and async clients share: configuration, building a request from an Operation,
the retry policy, and reading answers and errors. No I/O here."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import random
import ssl
import struct
import uuid
from base64 import b64decode
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlencode

import httpx

from . import models as m
from . import operations as ops
from ._decode import decode
from ._version import __version__
from .errors import (
    ConfigurationError,
    NetworkError,
    NotFound,
    ResponseError,
    SwitchboardError,
    error_class,
)
from .operations import Operation

API_PREFIX = "/api/v1"
USER_AGENT = f"switchboard-client/{__version__}"


def resolve_config(url: str | None, api_key: str | None) -> tuple[str, str]:
    """The base URL (without /api/v1) and API key: the arguments, else SWITCHBOARD_URL and
    SWITCHBOARD_API_KEY."""
    url = url or os.environ.get("SWITCHBOARD_URL")
    api_key = api_key or os.environ.get("SWITCHBOARD_API_KEY")
    if not url:
        raise ConfigurationError("Pass url= or set SWITCHBOARD_URL (e.g. http://localhost:8000).")
    if not api_key:
        raise ConfigurationError("Pass api_key= or set SWITCHBOARD_API_KEY.")
    url = url.rstrip("/")
    if url.endswith(API_PREFIX):
        url = url.removesuffix(API_PREFIX)
    return url, api_key


def default_headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}", "User-Agent": USER_AGENT}


@functools.cache
def no_tls_context() -> ssl.SSLContext:
    """The TLS context of a client whose server is plain http: one that trusts no certificate,
    so that a TLS connection it should never make fails its verification rather than pass.
    httpx otherwise loads certifi's certificates into a new context for every client it makes
    (20 to 40 ms, most of making a client: an adapter built per conversation paid it each
    time), for a client that only ever talks to its one http URL."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, check_hostname: the defaults


def http_options(url: str, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The httpx client's options: `given` (the caller's httpx_options, which win), and for a
    plain http server no_tls_context() as its `verify`."""
    options: dict[str, Any] = {}
    if url.startswith("http://"):
        options["verify"] = no_tls_context()
    return {**options, **(given or {})}


def given(**fields: Any) -> dict[str, Any]:
    """The fields that are not None: a body of the arguments a caller gave."""
    return {name: value for name, value in fields.items() if value is not None}


def new_key() -> str:
    """An idempotency key: 32 hex digits of a random UUID."""
    return uuid.uuid4().hex


# --- Requests --------------------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def encode_json(body: Any) -> bytes:
    return json.dumps(
        body, default=_json_default, ensure_ascii=False, separators=(",", ":")
    ).encode()


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


@dataclass(frozen=True, slots=True)
class Request:
    """One call, ready to send (and to send again when retried)."""

    operation: Operation
    url: str
    params: tuple[tuple[str, str], ...]
    content: bytes | None
    idempotent: bool
    timeout: float | None = None
    # The body's media type: JSON unless the operation takes raw bytes (build_upload).
    content_type: str = "application/json"
    # The answer's media type asked for, where the operation answers another than JSON.
    accept: str | None = None


def build(
    operation: Operation,
    path_params: Mapping[str, str] | None = None,
    *,
    query: Mapping[str, Any] | None = None,
    body: Mapping[str, Any] | None = None,
    idempotent: bool | None = None,
    timeout: float | None = None,
) -> Request:
    """A request for `operation`. Query parameters and body keys it does not declare are
    refused here (TypeError) rather than by the server. A query parameter that is None is left
    out; the body is sent as given (`given()` leaves out the arguments a method was not given)."""
    url = API_PREFIX + operation.path.format_map(
        {k: quote(str(v), safe="") for k, v in (path_params or {}).items()}
    )
    params: list[tuple[str, str]] = []
    for name, value in (query or {}).items():
        if value is None:
            continue
        if name not in operation.query and not name.startswith(operation.query_prefixes):
            raise TypeError(f"{operation.method} {operation.path} takes no parameter {name!r}")
        if isinstance(value, list | tuple | set | frozenset):
            params.extend((name, _query_value(item)) for item in value)
        else:
            params.append((name, _query_value(value)))
    content = None
    if body is not None:
        declared = (
            operation.body.__required_keys__ | operation.body.__optional_keys__
            if operation.body is not None
            else frozenset()
        )
        unknown = [k for k in body if k not in declared]
        if unknown:
            raise TypeError(f"{operation.method} {operation.path} takes no body field {unknown}")
        content = encode_json(body)
    return Request(
        operation=operation,
        url=url,
        params=tuple(params),
        content=content,
        idempotent=operation.idempotent if idempotent is None else idempotent,
        timeout=timeout,
    )


def build_upload(
    operation: Operation, path_params: Mapping[str, str], data: bytes, *, content_type: str
) -> Request:
    """A request sending `data` as the body itself (an artifact's file), of `content_type`."""
    if not operation.raw_body:
        raise TypeError(f"{operation.method} {operation.path} takes a JSON body, not bytes")
    request = build(operation, path_params)
    return dataclasses.replace(request, content=bytes(data), content_type=content_type)


def target(request: Request) -> str:
    """The request's path and query string. The query is what httpx makes of `params=` (urlencode
    of the pairs, repeated keys in order), so the URL is the same; given in the URL it is parsed
    once, where `params=` has httpx parse the URL, then merge and parse it again (a third of the
    CPU of building a request)."""
    if not request.params:
        return request.url
    return request.url + "?" + urlencode(request.params)


def http_headers(request: Request) -> dict[str, str] | None:
    headers = {}
    if request.content is not None:
        headers["Content-Type"] = request.content_type
    if request.accept is not None:
        headers["Accept"] = request.accept
    return headers or None


# --- Retries ---------------------------------------------------------------------------------

RETRY_STATUSES = frozenset({429, 503})

# No request reached the server: always safe to send again.
UNSENT_ERRORS: tuple[type[Exception], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
)
# The request may have been processed: sent again only when the call is idempotent.
MAYBE_SENT_ERRORS: tuple[type[Exception], ...] = (
    httpx.ReadError,
    httpx.WriteError,
    httpx.ReadTimeout,
    httpx.WriteTimeout,
    httpx.RemoteProtocolError,
)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of connection failures, 429 and 503: at most `max_retries` more attempts.

    Between them, the server's Retry-After when it sends one (a wait longer than
    `max_retry_after` is not made: the error is raised), else exponential backoff with full
    jitter: a uniform wait in [0, min(max_backoff, backoff * 2**attempt)]. Other statuses are
    never retried.
    """

    max_retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_retry_after: float = 60.0

    def jitter(self, attempt: int) -> float:
        return random.uniform(0.0, min(self.max_backoff, self.backoff * (2**attempt)))

    def after_response(self, attempt: int, response: httpx.Response) -> float | None:
        """Seconds to wait before sending again, or None to give up with this answer."""
        if response.status_code not in RETRY_STATUSES or attempt >= self.max_retries:
            return None
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        if retry_after is None:
            return self.jitter(attempt)
        if retry_after > self.max_retry_after:
            return None
        return retry_after

    def after_error(self, attempt: int, error: Exception, request: Request) -> float | None:
        """Seconds to wait before sending again after a transport error, or None to raise."""
        if attempt >= self.max_retries:
            return None
        if isinstance(error, UNSENT_ERRORS) or (
            request.idempotent and isinstance(error, MAYBE_SENT_ERRORS)
        ):
            return self.jitter(attempt)
        return None


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


# --- Answers ---------------------------------------------------------------------------------


def error_from(response: httpx.Response) -> SwitchboardError:
    """The typed exception of an error answer (its body already read)."""
    status = response.status_code
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    try:
        error = response.json()["error"]
        code, message, detail = error["code"], error["message"], error.get("detail")
    except (ValueError, KeyError, TypeError):
        code, detail = f"http_{status}", None
        message = response.text[:500] or response.reason_phrase
    return error_class(status)(
        message, status=status, code=code, detail=detail, retry_after=retry_after
    )


def read(request: Request, response: httpx.Response) -> Any:
    """The answer's model, or the typed error raised."""
    status = response.status_code
    if status >= 400:
        raise error_from(response)
    model = request.operation.responses.get(status)
    if model is None:
        raise ResponseError(
            f"{request.operation.method} {request.operation.path} answered {status}, which the "
            "client does not expect",
            status=status,
        )
    try:
        data = response.json()
    except ValueError as exc:
        raise ResponseError("the answer is not JSON", status=status) from exc
    return decode(model, data)


# A blob lookup's answer as bytes (the server's blob_api.BLOBS_MEDIA_TYPE): for each distinct
# name asked, in order, a 4-byte big-endian length then the blob, or a marker alone.
BLOBS_MEDIA_TYPE = "application/vnd.switchboard.blobs"
_LENGTH = struct.Struct(">I")
_MISSING, _NOT_SENT = 0xFFFFFFFF, 0xFFFFFFFE


def blobs_lookup(session_id: str, names: Sequence[str]) -> Request:
    """A lookup of `names` (distinct) with their bytes, answered as bytes, not JSON."""
    body = {"sha256": list(names), "data": True}
    request = build(ops.BLOBS_LOOKUP, {"session_id": session_id}, body=body)
    return dataclasses.replace(request, accept=BLOBS_MEDIA_TYPE)


def read_blobs(
    request: Request, response: httpx.Response, asked: Sequence[str]
) -> dict[str, bytes]:
    """The bytes a blobs_lookup answered, by name; the names past the answer's byte budget are
    left out (ask again). Raises NotFound naming those the session does not hold. A server
    answering JSON (one older than the bytes' answer) is read as well."""
    if response.status_code >= 400:
        raise error_from(response)
    loaded: dict[str, bytes] = {}
    missing: list[str] = []
    if response.headers.get("Content-Type") != BLOBS_MEDIA_TYPE:
        found: m.BlobLookup = read(request, response)
        missing = found.missing
        loaded = {b.sha256: b64decode(b.data) for b in found.blobs if b.data is not None}
    else:
        body = response.content
        offset = 0
        try:
            for name in asked:
                (length,) = _LENGTH.unpack_from(body, offset)
                offset += 4
                if length == _MISSING:
                    missing.append(name)
                elif length != _NOT_SENT:
                    loaded[name] = body[offset : offset + length]
                    offset += length
        except struct.error:
            offset = -1
        if offset != len(body):
            raise ResponseError(
                f"the blobs' answer ({len(body)} bytes) does not hold {len(asked)} names",
                status=response.status_code,
            )
    if missing:
        raise NotFound(
            f"the session holds no blob {missing[0]}",
            status=404,
            code="not_found",
            detail={"missing": missing},
        )
    return loaded


def network_error(error: Exception, request: Request) -> NetworkError:
    what = f"{request.operation.method} {request.url}"
    return NetworkError(f"{what}: {type(error).__name__}: {error}", code="network_error")


# --- Blobs ----------------------------------------------------------------------------------

# What one store may carry (the server's MAX_BLOBS_PER_CALL).
BLOBS_PER_CALL = 1000
# Names one lookup may carry (the server's MAX_LOOKUP_NAMES).
LOOKUP_NAMES_PER_CALL = 8000
# A piece of a value stored in pieces: half the server's default blob limit (512 KiB), small
# enough that a value which grew at its end sends little again.
PIECE_SIZE = 256 * 1024
# Bytes of blob data per store request before base64 (4 bytes per 3): under the server's
# default 1 MiB body limit with room for the JSON around them.
_BATCH_BYTES = 600 * 1024
# Below this many bytes to store, sending them is cheaper than asking which the server lacks.
ASK_FIRST_BYTES = 64 * 1024


class StoredBlobNames:
    """The blob names a client knows a session holds (it stored or found them), so a value
    stored again and again sends and asks about its new parts only. Forgotten whole past
    `limit` names (about 100 bytes each): the server still has them, the next store asks."""

    def __init__(self, limit: int = 1_000_000) -> None:
        self.limit = limit
        self._names: dict[str, set[str]] = {}
        self._count = 0

    def of(self, session_id: str) -> set[str]:
        return self._names.get(session_id, set())

    def add(self, session_id: str, names: list[str]) -> None:
        held = self._names.setdefault(session_id, set())
        before = len(held)
        held.update(names)
        self._count += len(held) - before
        if self._count > self.limit:
            self._names, self._count = {}, 0


def blob_batches(contents: list[bytes]) -> list[list[bytes]]:
    """`contents` in consecutive batches of at most _BATCH_BYTES (one larger blob alone: the
    server says whether it fits) and BLOBS_PER_CALL blobs each."""
    batches: list[list[bytes]] = []
    size = 0
    for content in contents:
        if not batches or len(batches[-1]) == BLOBS_PER_CALL or size + len(content) > _BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(content)
        size += len(content)
    return batches
