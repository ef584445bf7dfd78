import pytest

from .listener import GroupListener, redis_layer_configured


@pytest.fixture
def listen():
    """listen(*groups) -> a GroupListener on the real Redis layer; discarded after the test."""
    if not redis_layer_configured():
        pytest.skip("no Redis configured: these tests read the real channel layer")
    listeners: list[GroupListener] = []

    def make(*groups: str) -> GroupListener:
        listener = GroupListener(*groups)
        listeners.append(listener)
        return listener

    yield make
    for listener in listeners:
        listener.close()
