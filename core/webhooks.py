"""Webhook wire format: the envelope, the signature, its verification, one HTTP attempt.

No database here (core/services/webhooks.py stores and schedules). Receivers may import
`verify_signature` (or copy its dozen lines): README.md, "Webhooks".

A request carries

    POST <endpoint url>
    Content-Type: application/json
    Switchboard-Delivery: <delivery id>
    Switchboard-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, f"{t}.{body}")>

    {"id": <delivery id>, "type": <event name>, "created": <ISO 8601>, "data": {...}}

as Stripe signs: the timestamp is signed with the body, so a captured request cannot be
replayed later than the receiver's tolerance, and the delivery id lets it drop duplicates
(every retry and redelivery repeats the same id and body).
"""

import hashlib
import hmac
import ipaddress
import json
import random
import re
import secrets
import socket
import time
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

SIGNATURE_HEADER = "Switchboard-Signature"
DELIVERY_HEADER = "Switchboard-Delivery"
USER_AGENT = "Switchboard-Webhooks/1"

# The events a project can subscribe to (DESIGN.md, issue 10 point 6), with what they mean.
EVENTS: dict[str, str] = {
    "handoff.created": "An agent asked for a human.",
    "handoff.claimed": "A person claimed a handoff.",
    "handoff.answered": "A person answered a handoff.",
    "handoff.expired": "A handoff expired unanswered.",
    "handoff.overdue": "A handoff passed its due time.",
    "session.paused": "A session was paused.",
    "session.resumed": "A session was resumed.",
    "session.closed": "A session was closed.",
    "session.deleted": "A session was deleted (on request, or by retention).",
}

# 4xx answers that say "try later" rather than "never": retried like a 5xx.
RETRYABLE_4XX = frozenset({408, 425, 429})


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def envelope(delivery_id: str, event: str, created: datetime, data: dict[str, Any]) -> bytes:
    """The request body. Built the same way for every attempt of a delivery."""
    body = {"id": delivery_id, "type": event, "created": created.isoformat(), "data": data}
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def signature(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return mac.hexdigest()


def signature_header(secret: str, body: bytes, *, timestamp: int | None = None) -> str:
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={signature(secret, t, body)}"


def verify_signature(
    secret: str,
    header: str,
    body: bytes | str,
    tolerance: int = 300,
    *,
    now: float | None = None,
) -> bool:
    """True when `header` (the Switchboard-Signature value) signs `body` (the raw request body,
    before any JSON parsing) with `secret`, and its timestamp is within `tolerance` seconds of
    now. Several `v1=` entries may appear (a future secret rotation); one match is enough."""
    if isinstance(body, str):
        body = body.encode()
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            try:
                timestamp = int(value)
            except ValueError:
                return False
        elif key == "v1":
            candidates.append(value)
    if timestamp is None or not candidates:
        return False
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        return False
    expected = signature(secret, timestamp, body)
    return any(hmac.compare_digest(expected, c) for c in candidates)


def backoff_seconds(
    attempt: int, *, base_ms: int, max_ms: int, rng: random.Random | None = None
) -> float:
    """Delay after failed attempt number `attempt` (1, 2, …): exponential, capped, with "equal
    jitter" — a random point in the upper half of the step, so the delays keep growing while
    receivers that failed together are not all retried in the same instant."""
    step = min(max_ms, base_ms * (1 << max(0, attempt - 1))) / 1000
    return step / 2 + (rng or random).uniform(0, step / 2)


# --- Targets ----------------------------------------------------------------------------------


class TargetRefused(ValueError):
    """A URL Switchboard will not POST to; the message says why, in the product's words."""


# The IPv6 ranges that carry an IPv4 address inside (IPv4-compatible, NAT64, 6to4): the address
# inside is the one reached, so it is checked too.
_IPV4_INSIDE = (
    ipaddress.IPv6Network("::/96"),
    ipaddress.IPv6Network("64:ff9b::/96"),
    ipaddress.IPv6Network("64:ff9b:1::/48"),
)
# Full stops a resolver or an IDNA encoder reads as "." (IDNA's label separators).
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})
_HOST_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")
# Named in the refusal: a developer pointing a webhook at their own machine learns the switch.
_ALLOW_HINT = (
    " In development, set SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS=true in the server's"
    " environment to allow it."
)
_INTERNAL = "Webhooks cannot be sent to this machine or an internal name." + _ALLOW_HINT
_PRIVATE = "Webhooks cannot be sent to a loopback, private or reserved address." + _ALLOW_HINT


def _refused_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        inside = ip.ipv4_mapped or ip.sixtofour
        if inside is None and any(ip in network for network in _IPV4_INSIDE):
            inside = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if inside is not None and _refused_address(inside):
            return True
    return not ip.is_global or ip.is_multicast


def _host(raw: str) -> str:
    """The host as a resolver reads it: percent-escapes decoded, compatibility characters folded
    as IDNA folds them (NFKC: "①" is "1", a full-width or ideographic full stop is "."), lower
    case, without the trailing dot of a fully qualified name, an international name in its
    ASCII form. TargetRefused when what is left is no host name."""
    host = unicodedata.normalize("NFKC", unquote(raw)).translate(_DOTS).lower()
    if ":" in host:  # only an IPv6 literal (urlsplit took the port off)
        try:
            return str(ipaddress.IPv6Address(host))
        except ValueError:
            raise TargetRefused("The host name is not valid.") from None
    host = host.removesuffix(".")
    try:
        host = host.encode("idna").decode("ascii")  # also refuses empty and over-long labels
    except UnicodeError:
        raise TargetRefused("The host name is not valid.") from None
    if not _HOST_NAME.fullmatch(host):
        raise TargetRefused("The host name is not valid.")
    return host


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address `host` spells, in any form the C resolver accepts for one without asking DNS
    (2130706433, 0x7f000001, 0177.0.0.1, 127.1, 0, as well as 127.0.0.1 and IPv6)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


@dataclass(frozen=True)
class Target:
    """A URL Switchboard may POST to: the URL as given (trimmed), its host as resolved, and the
    addresses that host resolved to now (none when it did not resolve, or was not resolved
    because private targets are allowed)."""

    url: str
    host: str
    addresses: tuple[str, ...] = ()


def check_target(url: str, *, allow_private: bool) -> Target:
    """The one check of a webhook URL, when an endpoint is saved and before every delivery;
    TargetRefused (its message in the product's words) for one Switchboard will not POST to.

    Only http and https, a host name, no user name or password in it (secrets belong in the
    signing secret), a URL the HTTP client can send to. Unless `allow_private`: the host is read
    as the resolver reads it (`_host`) and refused when it is `localhost`, `*.localhost`,
    `*.local`, `*.internal` or this machine's name, spells a loopback, private, link-local or
    reserved address in any form, or resolves to one (a webhook must not reach the servers next
    to Switchboard). A name that does not resolve is let through, as at delivery: the attempt
    then fails to connect and is retried, so a name that will resolve later still works
    (`Target.addresses` is empty, for the page to say so).

    httpx resolves again when it connects, so a name whose answer changes in between (DNS
    rebinding) can slip past: deployments that need a hard guarantee route egress through a
    proxy that enforces it (README.md, "Webhooks")."""
    url = url.strip()
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise TargetRefused("That is not a valid URL.") from None
    if parts.scheme not in {"http", "https"}:
        raise TargetRefused("The URL must start with http:// or https://.")
    if not parts.hostname:
        raise TargetRefused("The URL needs a host name, like https://example.com/hooks.")
    if parts.username or parts.password:
        raise TargetRefused("Leave the user name and password out of the URL.")
    if port == 0:
        raise TargetRefused("That port is not valid.")
    host = _host(parts.hostname)
    literal = None
    if not allow_private:
        this_machine = socket.gethostname().lower()
        if host in {"localhost", this_machine, this_machine.partition(".")[0]} or host.endswith(
            (".localhost", ".local", ".internal")
        ):
            raise TargetRefused(_INTERNAL)
        literal = _literal(host)
        if literal is not None and _refused_address(literal):
            raise TargetRefused(_PRIVATE)
    try:
        httpx.URL(url)  # what the delivery will send to (it refuses some spellings above too)
    except httpx.InvalidURL:
        raise TargetRefused("That is not a valid URL.") from None
    if allow_private:
        return Target(url, host)
    if literal is not None:
        return Target(url, host, (str(literal),))
    try:
        infos = socket.getaddrinfo(host, port or 443, type=socket.SOCK_STREAM)
    except OSError:
        return Target(url, host)  # does not resolve (now): see above
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    if any(_refused_address(ipaddress.ip_address(a.partition("%")[0])) for a in addresses):
        raise TargetRefused("The host name points to a private or reserved address.")
    return Target(url, host, addresses)


# --- One attempt ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttemptResult:
    """What one POST came to. `retry_after` is the receiver's Retry-After, in seconds."""

    succeeded: bool
    retryable: bool
    response_code: int | None
    error: str
    duration_ms: int
    retry_after: float | None = None


def _retry_after(response: httpx.Response) -> float | None:
    raw = response.headers.get("Retry-After", "")
    return float(raw) if raw.isdigit() else None


def send(
    client: httpx.Client,
    url: str,
    *,
    secret: str,
    delivery_id: str,
    body: bytes,
    allow_private: bool,
    timeout: float,
) -> AttemptResult:
    """POST `body` once, signed now. Never raises for the receiver's failures: a 2xx succeeds;
    a 4xx other than 408/425/429 fails for good (the receiver understood and refused: the same
    request will be refused again, and retrying it only adds load); anything else — 3xx (not
    followed), 5xx, 408/425/429, a timeout, a refused or broken connection — is retried."""
    started = time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        check_target(url, allow_private=allow_private)
    except TargetRefused as refused:
        return AttemptResult(False, False, None, str(refused), elapsed())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        DELIVERY_HEADER: delivery_id,
        SIGNATURE_HEADER: signature_header(secret, body),
    }
    try:
        response = client.post(url, content=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        return AttemptResult(False, True, None, "The receiver did not answer in time.", elapsed())
    except httpx.ConnectError:
        return AttemptResult(False, True, None, "Could not connect to the receiver.", elapsed())
    except httpx.HTTPError as error:
        message = f"The connection failed ({type(error).__name__})."
        return AttemptResult(False, True, None, message, elapsed())
    code = response.status_code
    if 200 <= code < 300:
        return AttemptResult(True, False, code, "", elapsed())
    if 400 <= code < 500 and code not in RETRYABLE_4XX:
        message = f"The receiver refused it with {code}; not retried."
        return AttemptResult(False, False, code, message, elapsed())
    return AttemptResult(
        False,
        True,
        code,
        f"The receiver answered {code}.",
        elapsed(),
        retry_after=_retry_after(response),
    )
