"""core.realtime outside an ASGI server (a WSGI server's thread, a Celery worker, a command):
every send runs on one long-lived event loop of the process, and arrives in order."""

import threading

import pytest

from core import realtime

pytestmark = pytest.mark.requires_redis("the Redis channel layer")


def test_sends_from_plain_threads_share_one_loop_and_arrive_in_order(listen):
    listener = listen("loop-test-a", "loop-test-b")
    loops = []

    def send(i: int) -> None:
        assert realtime.send_to_groups(["loop-test-a", "loop-test-b"], {"type": "t", "n": i})
        loops.append(realtime._loop)

    for i in range(3):  # a fresh thread each time, as a WSGI server's pool may use
        thread = threading.Thread(target=send, args=(i,))
        thread.start()
        thread.join()
    assert len(set(map(id, loops))) == 1 and loops[0].is_running()
    received = listener.receive_all()
    # Each message once per group the listener joined, the messages in the order sent.
    assert sorted(m["n"] for m in received) == [0, 0, 1, 1, 2, 2]
    assert [m["n"] for m in received][::2] == [0, 1, 2]
