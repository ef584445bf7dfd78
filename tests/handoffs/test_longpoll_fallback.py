"""Without a reachable channel layer the long-poll still returns soon after the answer: it
falls back to re-reading the row about every second."""

import threading
import time

import pytest
from django.db import connection

from handoffs_app import waiting
from handoffs_app.models import Handoff
from handoffs_app.services import handoffs as svc
from tests.factories import make_session
from tests.servers import free_port

from .helpers import ask, operator

LAYERS = {
    "redis down": {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": "redis://127.0.0.1:1/0", "socket_timeout": 1}]},
        }
    },
    "in-memory": {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}},
}


@pytest.mark.parametrize("layer", list(LAYERS))
def test_it_polls_when_the_layer_cannot_wake_it(transactional_db, settings, api, project, layer):
    if layer == "redis down":
        LAYERS[layer]["default"]["CONFIG"]["hosts"][0]["address"] = (
            f"redis://127.0.0.1:{free_port()}/0"
        )
    settings.CHANNEL_LAYERS = LAYERS[layer]
    session = make_session(project)
    user = operator(project)
    handoff = ask(session)
    svc.claim_handoff(handoff, user=user)
    answered = []

    def answer_soon():
        time.sleep(0.5)
        try:
            svc.accept(Handoff.objects.get(pk=handoff.pk), user=user)
            answered.append(time.monotonic())
        finally:
            connection.close()

    thread = threading.Thread(target=answer_soon)
    thread.start()
    response = api.get(f"/handoffs/{handoff.pk}?wait=10")
    returned = time.monotonic()
    thread.join()
    assert response.json()["status"] == "answered"
    assert returned - answered[0] < waiting.POLL_SECONDS + 0.5
