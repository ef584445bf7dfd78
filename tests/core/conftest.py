from pathlib import Path

import pytest

from .listener import GroupListener, redis_layer_configured

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    """A test here that listens on the real channel layer (the `listen` fixture) needs Redis:
    the shared `requires_redis` marker skips it with the reason without Redis, and fails it
    under CI (tests/conftest.py)."""
    for item in items:
        if (
            "listen" in getattr(item, "fixturenames", ())
            and item.path.is_relative_to(HERE)
            and item.get_closest_marker("requires_redis") is None
        ):
            item.add_marker(pytest.mark.requires_redis("live notices heard on the channel layer"))


@pytest.fixture
def listen():
    """listen(*groups) -> a GroupListener on the real Redis layer; discarded after the test."""
    # Marked requires_redis above, so the test never gets here without Redis configured.
    assert redis_layer_configured(), "listen needs the Redis channel layer (REDIS_URL)"
    listeners: list[GroupListener] = []

    def make(*groups: str) -> GroupListener:
        listener = GroupListener(*groups)
        listeners.append(listener)
        return listener

    yield make
    for listener in listeners:
        listener.close()
