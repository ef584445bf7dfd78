"""Observable readiness of a long-poll on a real server, for tests to wait on instead of sleeping:
the server's waiting-long-polls gauge (its /metrics) and the handoffs' channel-layer groups; and
a warmed-up server, whose thread count is then a baseline."""

import re
import time

import httpx
import redis
from django.conf import settings

from handoffs_app.domain_events import handoff_group

WAITING = "switchboard_handoff_longpolls_waiting"


def eventually(predicate, timeout: float, what: str = "condition") -> float:
    """Seconds until `predicate()` held (fails after `timeout`, naming `what` did not happen)."""
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout, f"{what} not reached in {timeout} s"
        time.sleep(0.05)
    return time.monotonic() - started


def warm_up(base: str, headers: dict[str, str], handoff_id) -> None:
    """Start what any request starts once on the server at `base` (the WSGI pool, Django's ASGI
    handler, the loop's default executor) and finish one long-poll of the handoff, so that the
    server's thread count taken next is its baseline."""
    with httpx.Client(base_url=base, headers=headers, timeout=10) as client:
        for _ in range(12):
            assert client.get(f"/api/v1/handoffs/{handoff_id}").status_code == 200
        assert client.get(f"/api/v1/handoffs/{handoff_id}", params={"wait": 1}).status_code == 200


def metric(base: str, name: str, token: str) -> float:
    """The value of `name` on the server's /metrics (0 when absent); `token` is the server's
    SWITCHBOARD_METRICS_TOKEN."""
    text = httpx.get(
        base + "/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10
    ).text
    found = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.M)
    return float(found[1]) if found else 0.0


def group_members(handoff_ids) -> int:
    """Subscribers of the handoffs' channel-layer groups (channels-redis pub/sub: a server
    process subscribes to a group's Redis channel while one of its waits is in it, and leaves
    it when the last one does; one server process here, one wait per handoff)."""
    config = settings.CHANNEL_LAYERS["default"]["CONFIG"]
    prefix = config.get("prefix", "asgi")
    client = redis.Redis.from_url(config["hosts"][0]["address"])
    try:
        names = [f"{prefix}__group__{handoff_group(pk)}" for pk in handoff_ids]
        return sum(count for _, count in client.pubsub_numsub(*names))
    finally:
        client.close()
