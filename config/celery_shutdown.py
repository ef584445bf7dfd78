"""The Celery worker's parts for the filesystem broker (no services: scripts/run's default), made
to stop within a fraction of a second of SIGTERM or Ctrl-C instead of 4-7 s.

A worker on this broker runs Celery's blocking loop (celery.worker.loops.synloop): it checks for
a shutdown request between calls to `drain_events(timeout=2.0)`, and kombu's virtual transport
polls the queue folder once a second until those 2 s are up. The signal handler only sets a
flag, so the worker noticed it up to 2 s late. Then the worker's timer thread, stopped last,
waits up to 1 s on its condition before it sees that it was stopped.

- `Transport` polls the folder every POLL_SECONDS and, once the worker is asked to stop, returns
  from `drain_events` within DRAIN_SECONDS, so the loop sees the flag within that.
- `Timer` wakes its thread when it is stopped.
- `Channel` writes each message file whole before the worker can see it.
"""

import os
import uuid
from time import monotonic

from celery.utils import timer2
from celery.worker import state as worker_state
from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

# A listdir of the queue folder each time: a few microseconds.
POLL_SECONDS = 0.1
DRAIN_SECONDS = 0.25


def _worker_is_stopping() -> bool:
    # What celery.worker.state.maybe_shutdown() tests: 0 (EX_OK) is a request too.
    return any(
        flag is not None and flag is not False
        for flag in (worker_state.should_stop, worker_state.should_terminate)
    )


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        """As kombu's, but the message file appears whole: written under a name the consumer
        skips, then renamed. kombu's consumer renames a file away as soon as it is listed, so a
        worker polling often read a message still being written: empty, and the worker died of
        a JSONDecodeError (seen with the 0.1 s polling here)."""
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        path = os.path.join(self.data_folder_out, name)
        try:
            with open(path + ".part", "wb") as part:
                part.write(str_to_bytes(dumps(payload)))
            os.replace(path + ".part", path)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {path!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
    polling_interval = POLL_SECONDS

    def drain_events(self, connection, timeout=None):
        """As kombu's, in slices of DRAIN_SECONDS: between two, a worker asked to stop gets its
        TimeoutError (socket.timeout) at once, and its loop stops. Any other caller waits as
        long as it asked."""
        deadline = None if timeout is None else monotonic() + timeout
        while True:
            step = DRAIN_SECONDS if deadline is None else min(DRAIN_SECONDS, deadline - monotonic())
            try:
                return super().drain_events(connection, timeout=max(step, 0))
            except TimeoutError:  # socket.timeout
                if _worker_is_stopping() or (deadline is not None and monotonic() >= deadline):
                    raise


class Timer(timer2.Timer):
    def stop(self) -> None:
        # timer2.Timer.stop() sets the flag and waits for the thread, which sleeps in
        # `not_empty.wait(1.0)` while nothing is scheduled and only then looks at the flag.
        self._Timer__is_shutdown.set()  # type: ignore[attr-defined]
        with self.not_empty:
            self.not_empty.notify_all()
        super().stop()
