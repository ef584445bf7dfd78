"""Who sent a request: the client's address, decided from settings.SWITCHBOARD_TRUSTED_PROXIES.

Every server Switchboard runs under hands Django the address of the connection's other end as
REMOTE_ADDR and leaves X-Forwarded-For alone (uvicorn runs with --no-proxy-headers: by default
it would believe the header from 127.0.0.1 and ::1; granian's WSGI server never reads it), so
this is the one place that decides whether to believe the header. Anything keyed by the client
(the sign-in throttle, core.ratelimit) asks `client_address(request)`.
"""

import ipaddress
from collections.abc import Iterable, Sequence
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def client_address(request: HttpRequest) -> str:
    """The address of the client that sent `request`.

    REMOTE_ADDR, unless it is a trusted proxy: then X-Forwarded-For is read from the right
    (each proxy appends the address it was connected from), skipping the trusted proxies, and
    the first address that is not one is the client's. Whatever stands to the left of it was
    written by the client itself and proves nothing. With every hop trusted, the farthest.
    """
    return decide(
        str(request.META.get("REMOTE_ADDR", "")),
        str(request.META.get("HTTP_X_FORWARDED_FOR", "")),
        tuple(settings.SWITCHBOARD_TRUSTED_PROXIES),
    )


def decide(peer: str, forwarded_for: str, trusted_proxies: Sequence[str]) -> str:
    """`client_address` on plain values: the connection's address, the X-Forwarded-For header
    (several headers joined by commas) and the trusted proxies (IPs and CIDR networks)."""
    networks = _networks(tuple(trusted_proxies))
    if not _is_trusted(peer, networks):
        return _normalised(peer)
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _is_trusted(hop, networks):
            return _normalised(hop)
    return _normalised(hops[0]) if hops else _normalised(peer)


@lru_cache(maxsize=8)
def _networks(trusted_proxies: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(item, strict=False) for item in trusted_proxies)


def _is_trusted(value: str, networks: Iterable[Network]) -> bool:
    address = _parse(value)
    return address is not None and any(address in network for network in networks)


def _normalised(value: str) -> str:
    address = _parse(value)
    return str(address) if address is not None else value


def _parse(value: str) -> Address | None:
    """An address as proxies write it: `203.0.113.7`, `203.0.113.7:5060`, `2001:db8::1` or
    `[2001:db8::1]:5060`; an IPv4 address mapped into IPv6 (a dual-stack socket) as IPv4.
    None for anything else (`unknown`, a name, garbage)."""
    value = value.strip()
    if value.startswith("["):
        value = value[1 : value.find("]")] if "]" in value else value
    elif value.count(":") == 1:  # IPv4 with a port (an IPv6 address has two colons or more)
        value = value.partition(":")[0]
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address
